// Formats oneDNN failures as LibraryError.
#include "kernels/cpu/dnnl_check.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::kernels {

void throw_dnnl_error(const dnnl::error& error, std::string_view call, std::string_view file,
                      int line) {
  throw LibraryError("oneDNN", call, file, line,
                     fmt::format("{} (status {})", error.what(), int(error.status)));
}

}  // namespace dlscale::kernels
