// Formats oneDNN failures as LibraryError; a failed allocation as OutOfMemory.
#include "kernels/cpu/dnnl_check.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cstddef>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::kernels {

void throw_dnnl_error(const dnnl::error& error, std::string_view call, std::string_view file,
                      int line) {
  const std::string message = fmt::format("{} (status {})", error.what(), int(error.status));
  if (error.status == dnnl_out_of_memory) throw OutOfMemory("oneDNN", call, file, line, message);
  throw LibraryError("oneDNN", call, file, line, message);
}

void require_address_space_for_a_primitive() {
  // Above what one primitive's generated code and descriptors take: fcn:784,64,10's first
  // matmul crashed with 0.1 MiB of the limit left, and ran with 50 MiB.
  constexpr std::size_t reserve_bytes = std::size_t(16) << 20;
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  void* reserve = mmap(nullptr, reserve_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
  if (reserve == MAP_FAILED)
    throw OutOfMemory("oneDNN", "mmap", __FILE__, __LINE__,
                      fmt::format("the address-space limit (ulimit -v {} KiB) leaves less than "
                                  "{} MiB to make a primitive",
                                  limit.rlim_cur / 1024, reserve_bytes >> 20));
  munmap(reserve, reserve_bytes);
}

}  // namespace dlscale::kernels
