// libdlscale_cuda.so, loaded on first use: the CUDA device and the NCCL backend live there
// (kernels/cuda/cuda_plugin.cpp), so that nothing else in dlscale links CUDA.
#pragma once

#include "kernels/gpu_module_entry_points.hpp"

namespace dlscale::kernels {

// Whether this dlscale was built with the module (a CUDA toolkit and cuDNN were found), and what
// to say when it was not.
bool gpu_module_built();
inline constexpr const char* built_without_cuda =
    "this dlscale was built without CUDA (no CUDA toolkit or cuDNN was found when it was "
    "configured); rebuild with -DDLSCALE_WITH_CUDA=ON";

// The module's entry points. Throws UserError, naming `option` and what dlopen said, when the
// module cannot be loaded: a build without CUDA, or a node without the CUDA libraries.
const GpuModuleEntryPoints& gpu_module(const char* option);

}  // namespace dlscale::kernels
