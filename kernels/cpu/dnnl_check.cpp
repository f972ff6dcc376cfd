// Formats oneDNN failures as LibraryError; a failed allocation as OutOfMemory.
#include "kernels/cpu/dnnl_check.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::kernels {

void throw_dnnl_error(const dnnl::error& error, std::string_view call, std::string_view file,
                      int line) {
  const std::string message = fmt::format("{} (status {})", error.what(), int(error.status));
  if (error.status == dnnl_out_of_memory) throw OutOfMemory("oneDNN", call, file, line, message);
  throw LibraryError("oneDNN", call, file, line, message);
}

}  // namespace dlscale::kernels
