// The entry points of libdlscale_cuda.so, the module that holds the CUDA device and the NCCL
// backend. dlscale loads it with dlopen only when a run asks for --device cuda, so that the other
// commands, and CPU runs, do not pay for mapping CUDA, cuBLAS, cuDNN and NCCL (about a second per
// process) and start on nodes without them. kernels/gpu_module.cpp is the other side.
#include <mpi.h>

#include "kernels/cuda/cuda_device.hpp"
#ifdef DLSCALE_HAVE_NCCL
#include "comm/nccl/nccl_gradient_communicator.hpp"
#endif

using dlscale::kernels::CudaDevice;

extern "C" {

int dlscale_cuda_visible_gpu_count() { return dlscale::kernels::visible_gpu_count(); }

// Errors are thrown as the UserError and LibraryError of the program that loaded the module.
dlscale::kernels::Device* dlscale_cuda_make_device(int gpu_index,
                                                   dlscale::kernels::Precision precision) {
  return new CudaDevice(gpu_index, precision);
}

#ifdef DLSCALE_HAVE_NCCL
dlscale::comm::GradientCommunicator* dlscale_nccl_make_communicator(
    MPI_Comm group, dlscale::kernels::Device& device) {
  return new dlscale::comm::NcclGradientCommunicator(group, dynamic_cast<CudaDevice&>(device));
}
#endif

}  // extern "C"
