// The checked-call idiom for NVIDIA's cuDNN frontend, whose calls return an error object (code and
// message) instead of a status: DLSCALE_CUDNN_FRONTEND_CHECK throws LibraryError with the call,
// file, line and the frontend's own message, as the other libraries' macros do (cuda_check.hpp).
// And the one step every user of the frontend takes first: open_cudnn_for_the_frontend().
#pragma once

#include <string_view>

#include <cudnn_frontend.h>

#include "core/errors.hpp"

namespace dlscale::kernels {

inline void check_cudnn_frontend(cudnn_frontend::error_t result, std::string_view call,
                                 std::string_view file, int line) {
  if (result.is_bad()) throw LibraryError("cuDNN frontend", call, file, line, result.get_message());
}

// The frontend calls cuDNN through a handle of its own (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING,
// see CMakeLists.txt): sets it, once, to cuDNN's (already mapped: the module links it).
// Defined in cudnn_frontend_loading.cpp.
void open_cudnn_for_the_frontend();

}  // namespace dlscale::kernels

#define DLSCALE_CUDNN_FRONTEND_CHECK(call) \
  ::dlscale::kernels::check_cudnn_frontend((call), #call, __FILE__, __LINE__)
