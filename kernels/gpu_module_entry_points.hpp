// The entry points of libdlscale_cuda.so, declared once for both sides: the module fills in one
// table (gpu_module/cuda_module.cpp) and dlscale looks up that one symbol
// (kernels/gpu_module_loader.cpp), as each nccl-tests collective fills in a struct testColl.
#pragma once

#include "kernels/device.hpp"

// The module's table does not see MPI: the NCCL backend's group travels as comm::MpiGroup, which
// comm/communicator_factory.hpp defines for the two sides that open it.
namespace dlscale::comm {
class GradientCommunicator;
struct MpiGroup;
enum class GradientDtype;  // comm/gradient_communicator.hpp
}  // namespace dlscale::comm

namespace dlscale::gpu_module {

// Errors are thrown as the UserError and LibraryError of the program that loaded the module.
struct EntryPoints {
  int (*visible_gpu_count)();  // 0 when there is no driver or no GPU
  kernels::Device* (*make_device)(int gpu_index, kernels::Precision precision);
  // The NCCL backend for a CUDA device, summing `dtype`; null in a module built without NCCL.
  comm::GradientCommunicator* (*make_nccl_communicator)(const comm::MpiGroup& group,
                                                        kernels::Device& device,
                                                        comm::GradientDtype dtype);
};

// The name the table is exported under.
inline constexpr const char* symbol = "dlscale_gpu_module";

}  // namespace dlscale::gpu_module

extern "C" const dlscale::gpu_module::EntryPoints dlscale_gpu_module;
