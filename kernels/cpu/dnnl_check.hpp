// The one checked-call idiom for oneDNN: its C++ API throws dnnl::error; DLSCALE_DNNL_CHECK runs
// an expression and turns that into a LibraryError naming the call, file, line and oneDNN status.
#pragma once

#include <string_view>

#include <oneapi/dnnl/dnnl.hpp>

namespace dlscale::kernels {

[[noreturn]] void throw_dnnl_error(const dnnl::error& error, std::string_view call,
                                   std::string_view file, int line);

}  // namespace dlscale::kernels

#define DLSCALE_DNNL_CHECK(expression)                                              \
  [&]() -> decltype(auto) {                                                         \
    try {                                                                           \
      return (expression);                                                          \
    } catch (const dnnl::error& error) {                                            \
      ::dlscale::kernels::throw_dnnl_error(error, #expression, __FILE__, __LINE__); \
    }                                                                               \
  }()
