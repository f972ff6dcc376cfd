// The one checked-call idiom for oneDNN: its C++ API throws dnnl::error; DLSCALE_DNNL_CHECK runs
// an expression and turns that into a LibraryError naming the call, file, line and oneDNN status.
#pragma once

#include <string_view>

#include <oneapi/dnnl/dnnl.hpp>

namespace dlscale::kernels {

[[noreturn]] void throw_dnnl_error(const dnnl::error& error, std::string_view call,
                                   std::string_view file, int line);

// oneDNN follows a null pointer (SIGSEGV in dnnl_primitive_create) when it cannot map the code of
// a primitive it generates, as under an address-space limit (`ulimit -v`) that is nearly used up.
// Called before a primitive is made: where such a limit is set, maps and unmaps a reserve of
// address space first, and throws OutOfMemory naming the limit where that fails.
void require_address_space_for_a_primitive();

}  // namespace dlscale::kernels

#define DLSCALE_DNNL_CHECK(expression)                                              \
  [&]() -> decltype(auto) {                                                         \
    try {                                                                           \
      return (expression);                                                          \
    } catch (const dnnl::error& error) {                                            \
      ::dlscale::kernels::throw_dnnl_error(error, #expression, __FILE__, __LINE__); \
    }                                                                               \
  }()
