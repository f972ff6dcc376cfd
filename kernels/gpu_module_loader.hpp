// libdlscale_cuda.so, loaded on first use: the CUDA device and the NCCL backend live there
// (gpu_module/cuda_module.cpp), so that nothing else in dlscale links CUDA. The loader sits in
// kernels/, below the device registry and comm/'s backend registry that call it; the module is
// built above both.
#pragma once

#include "kernels/gpu_module_entry_points.hpp"

namespace dlscale::gpu_module {

// Whether this dlscale was built with the module (a CUDA toolkit and cuDNN were found), and what
// to say when it was not.
bool built();
inline constexpr const char* built_without_cuda =
    "this dlscale was built without CUDA (no CUDA toolkit or cuDNN was found when it was "
    "configured); rebuild with -DDLSCALE_WITH_CUDA=ON";

// The module's entry points. Throws UserError, naming `option` and what dlopen said, when the
// module cannot be loaded: a build without CUDA, or a node without the CUDA libraries.
const EntryPoints& entry_points(const char* option);

}  // namespace dlscale::gpu_module
