// The names dlscale's helper threads give themselves (pthread_setname_np, at most 15 characters),
// so that a probe, top -H or a debugger can tell them from the compute threads.
#pragma once

namespace dlscale {

inline constexpr const char* communication_thread_name = "dlscale-comm";  // overlapped sums
inline constexpr const char* sampling_thread_name = "dlscale-sample";     // resource sampler

}  // namespace dlscale
