// The entry points of libdlscale_cuda.so, declared once for both sides: the module fills in one
// table (kernels/cuda/cuda_plugin.cpp) and dlscale looks up that one symbol
// (kernels/gpu_module.cpp), as each nccl-tests collective fills in a struct testColl.
#pragma once

#include "kernels/device.hpp"

// kernels/ does not see MPI: the NCCL backend's group travels as comm::MpiGroup, which
// comm/communicator_factory.hpp defines for the two sides that open it.
namespace dlscale::comm {
class GradientCommunicator;
struct MpiGroup;
}  // namespace dlscale::comm

namespace dlscale::kernels {

// Errors are thrown as the UserError and LibraryError of the program that loaded the module.
struct GpuModuleEntryPoints {
  int (*visible_gpu_count)();  // 0 when there is no driver or no GPU
  Device* (*make_device)(int gpu_index, Precision precision);
  // The NCCL backend for a CUDA device; null in a module built without NCCL.
  comm::GradientCommunicator* (*make_nccl_communicator)(const comm::MpiGroup& group,
                                                        Device& device);
};

// The name the table is exported under.
inline constexpr const char* gpu_module_symbol = "dlscale_gpu_module";

}  // namespace dlscale::kernels

extern "C" const dlscale::kernels::GpuModuleEntryPoints dlscale_gpu_module;
