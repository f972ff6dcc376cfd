// The checked-call idiom for NCCL: DLSCALE_NCCL_CHECK throws LibraryError naming the call, file,
// line and NCCL's error string (with its last detailed message where it has one).
#pragma once

#include <string_view>

#include <nccl.h>

namespace dlscale::comm {

void check_nccl(ncclResult_t result, std::string_view call, std::string_view file, int line);

}  // namespace dlscale::comm

#define DLSCALE_NCCL_CHECK(call) ::dlscale::comm::check_nccl((call), #call, __FILE__, __LINE__)
