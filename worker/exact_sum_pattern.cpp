// Contributions and their exact sums; see the header for why they are exact.
#include "worker/exact_sum_pattern.hpp"

namespace dlscale::worker {

namespace {

constexpr std::uint64_t base_period = 61;  // prime, so the pattern shifts against power-of-2 sizes

std::uint64_t base(std::size_t index, std::uint64_t call) {
  return (index + 3 * call) % base_period;
}

}  // namespace

void fill_contribution(std::span<float> buffer, int rank, std::uint64_t call) {
  for (std::size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = float(base(i, call) + std::uint64_t(rank));
}

std::uint64_t count_wrong_elements(std::span<const float> reduced, int ranks, std::uint64_t call) {
  const auto n = std::uint64_t(ranks);
  const std::uint64_t rank_offsets = n * (n - 1) / 2;
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < reduced.size(); ++i)
    wrong += reduced[i] != float(n * base(i, call) + rank_offsets);
  return wrong;
}

}  // namespace dlscale::worker
