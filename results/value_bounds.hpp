// The bounds every reader of a results file holds it to: the C++ reader (predict, merge) here and
// report/dlscale_results.py with the same numbers, listed in docs/results-format.md (a test
// checks that the three agree). What passes them can be summed, divided and written back without
// turning into an infinity or a NaN that the report would then call damage.
#pragma once

namespace dlscale::results::bounds {

// No stored number is larger in magnitude: above it, sums and ratios of them overflow.
inline constexpr double largest_value = 1e30;
// A phase lasts at most this long (30 years), and a whole step at least a nanosecond (no clock
// dlscale uses ticks faster): so a throughput, a speedup or a Karp-Flatt value stays far below
// largest_value.
inline constexpr double longest_seconds = 1e9;
inline constexpr double shortest_step_seconds = 1e-9;
// A --target-loss is below this many nats (a --target-accuracy is in (0, 1]); a file's
// target_value is held to the same.
inline constexpr double largest_target_loss = 1e6;
// Runs in a file, and rows of its tables (failed points, node-sharing probes, comm sizes).
inline constexpr long long most_runs = 65536;
// The CPU time a reader may spend on a file: a few seconds, and one more for every 4 MiB of it.
// Many times what a real file takes; it ends the HDF5 library looping on a damaged structure.
inline constexpr double read_cpu_seconds = 3;
inline constexpr double read_bytes_per_cpu_second = 4 * 1024 * 1024;

}  // namespace dlscale::results::bounds
