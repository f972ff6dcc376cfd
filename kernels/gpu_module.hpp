// libdlscale_cuda.so, loaded on first use: the CUDA device and the NCCL backend live there
// (kernels/cuda/cuda_plugin.cpp), so that nothing else in dlscale links CUDA.
#pragma once

#include <memory>

#include "kernels/device.hpp"

namespace dlscale::kernels {

// Whether this dlscale was built with the module (a CUDA toolkit and cuDNN were found), and what
// to say when it was not.
bool gpu_module_built();
inline constexpr const char* built_without_cuda =
    "this dlscale was built without CUDA (no CUDA toolkit or cuDNN was found when it was "
    "configured); rebuild with -DDLSCALE_WITH_CUDA=ON";

// Each of these throws UserError, naming `option` (or --device cuda) and what dlopen said, when
// the module cannot be loaded: a build without CUDA, or a node without the CUDA libraries.

// GPUs this process can see (0 when there is no driver or no GPU).
int visible_gpu_count(const char* option);

std::unique_ptr<Device> make_cuda_device(int gpu_index, Precision precision);

// An entry point of the module by name, for code outside kernels/ (the NCCL backend); null when
// the module lacks it.
void* gpu_module_entry(const char* name, const char* option);

}  // namespace dlscale::kernels
