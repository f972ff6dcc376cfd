// fill_in_parallel writes what one thread's loop writes, whatever the number of threads, and each
// index exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/parallel_fill.hpp"
#include "core/random.hpp"

namespace dlscale {
namespace {

TEST(ParallelFill, EveryThreadCountWritesWhatOneThreadWrites) {
  const CounterRandom random(42, 7);
  const auto value_of = [&](std::size_t i) { return float(random.normal(i)); };
  // Sizes below, at and around the threshold where a second thread starts, and ranges that do
  // not divide evenly.
  for (const std::size_t size : {std::size_t(0), std::size_t(1), values_per_fill_thread - 1,
                                 2 * values_per_fill_thread + 3, 5 * values_per_fill_thread + 11}) {
    std::vector<float> serial(size);
    for (std::size_t i = 0; i < size; ++i) serial[i] = value_of(i);
    for (const int threads : {1, 2, 3, 7, 0}) {
      std::vector<float> filled(size, -1.0f);
      fill_in_parallel(std::span<float>(filled), value_of, threads);
      EXPECT_EQ(filled, serial) << size << " values on " << threads << " threads";
    }
  }
}

TEST(ParallelFill, EachIndexIsVisitedOnce) {
  const std::size_t size = 4 * values_per_fill_thread + 5;
  std::vector<std::atomic<int>> visits(size);
  std::vector<std::uint8_t> out(size);
  fill_in_parallel(
      std::span<std::uint8_t>(out),
      [&](std::size_t i) {
        visits[i].fetch_add(1, std::memory_order_relaxed);
        return std::uint8_t(1);
      },
      4);
  std::size_t wrong = 0;
  for (const auto& count : visits) wrong += count.load() != 1;
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace dlscale
