// Formats NCCL failures as LibraryError.
#include "comm/nccl/nccl_check.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::comm {

void check_nccl(ncclResult_t result, std::string_view call, std::string_view file, int line) {
  if (result == ncclSuccess) return;
  const char* detail = ncclGetLastError(nullptr);
  throw LibraryError("NCCL", call, file, line,
                     detail != nullptr && *detail != '\0'
                         ? fmt::format("{} ({})", ncclGetErrorString(result), detail)
                         : std::string(ncclGetErrorString(result)));
}

}  // namespace dlscale::comm
