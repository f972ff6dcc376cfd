// The entry points of libdlscale_cuda.so, the module that holds the CUDA device and the NCCL
// backend. dlscale loads it with dlopen only when a run asks for --device cuda, so that the other
// commands, and CPU runs, do not pay for mapping CUDA, cuBLAS, cuDNN and NCCL (about a second per
// process) and start on nodes without them. kernels/gpu_module_loader.cpp is the other side.
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/gpu_module_entry_points.hpp"
#ifdef DLSCALE_HAVE_NCCL
#include "comm/communicator_factory.hpp"
#include "comm/nccl/nccl_gradient_communicator.hpp"
#endif

namespace {

using dlscale::kernels::CudaDevice;
using dlscale::kernels::Device;

#ifdef DLSCALE_HAVE_NCCL
dlscale::comm::GradientCommunicator* make_nccl_communicator(const dlscale::comm::MpiGroup& group,
                                                            Device& device,
                                                            dlscale::comm::GradientDtype dtype) {
  return new dlscale::comm::NcclGradientCommunicator(group.comm, dynamic_cast<CudaDevice&>(device),
                                                     dtype);
}
#endif

}  // namespace

extern "C" const dlscale::gpu_module::EntryPoints dlscale_gpu_module = {
    [] { return dlscale::kernels::visible_gpu_count(); },
    [](int gpu_index, dlscale::kernels::Precision precision) -> Device* {
      return new CudaDevice(gpu_index, precision);
    },
#ifdef DLSCALE_HAVE_NCCL
    make_nccl_communicator,
#else
    nullptr,
#endif
};
