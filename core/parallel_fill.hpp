// Fills a span with a pure function of the index on the CPUs this process may run on: what a
// layer's initial parameters are (core/random.hpp's counter-based streams make value i a function
// of i alone), so the result does not depend on how many threads made it. gpt2-small's 124
// million values took about 3 s on one thread, paid again by every process before its first step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <thread>
#include <vector>

#include "core/host_info.hpp"

namespace dlscale {

// Below this many values a span is filled on the calling thread: starting threads costs more.
inline constexpr std::size_t values_per_fill_thread = std::size_t(1) << 20;

// out[i] = value_of(i) for every i, on up to `threads` threads (0: one per CPU this process may
// run on), each a contiguous range of at least values_per_fill_thread values.
template <typename T, typename ValueOf>
void fill_in_parallel(std::span<T> out, const ValueOf& value_of, int threads = 0) {
  if (threads <= 0) threads = std::max(1, allowed_cpu_count());
  const std::size_t ranges =
      std::clamp<std::size_t>(out.size() / values_per_fill_thread, 1, std::size_t(threads));
  const auto fill = [&](std::size_t range) {
    const std::size_t begin = out.size() * range / ranges;
    const std::size_t end = out.size() * (range + 1) / ranges;
    for (std::size_t i = begin; i < end; ++i) out[i] = value_of(i);
  };
  if (ranges == 1) {
    fill(0);
    return;
  }
  std::vector<std::jthread> fillers;  // joined when destroyed, also if starting one throws
  fillers.reserve(ranges - 1);
  for (std::size_t range = 1; range < ranges; ++range) fillers.emplace_back(fill, range);
  fill(0);
}

}  // namespace dlscale
