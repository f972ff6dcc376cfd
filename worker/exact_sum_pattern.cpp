// Contributions and their exact sums; see the header for why they are exact.
#include "worker/exact_sum_pattern.hpp"

namespace dlscale::worker {

namespace {

// The two periods of a dtype's pattern. The base periods are prime, so the pattern shifts against
// power-of-2 sizes, and 3 is not a multiple of either, so consecutive calls differ everywhere.
struct Periods {
  std::uint64_t base;
  std::uint64_t rank;
};

// Float32's rank period is past any rank count it can sum exactly, so its rank term is the rank:
// then a sum with one rank missing, or one rank twice, differs wherever base(i, c) + r differs.
constexpr Periods float_periods{61, std::uint64_t(1) << 24};
constexpr Periods bf16_periods{5, 8};
// The largest integer up to which every integer is representable: 2^24 in float32, 2^8 in bf16.
constexpr std::uint64_t float_exact_limit = std::uint64_t(1) << 24;
constexpr std::uint64_t bf16_exact_limit = 256;

constexpr Periods periods_of(comm::GradientDtype dtype) {
  return dtype == comm::GradientDtype::bf16 ? bf16_periods : float_periods;
}

constexpr std::uint64_t base(Periods periods, std::uint64_t index, std::uint64_t call) {
  return (index + 3 * call) % periods.base;
}

// The sum over ranks 0..n-1 of (r mod p): n/p whole periods of 0..p-1, then 0..(n mod p)-1.
constexpr std::uint64_t rank_terms(Periods periods, std::uint64_t ranks) {
  const std::uint64_t p = periods.rank, whole = ranks / p, rest = ranks % p;
  return whole * (p * (p - 1) / 2) + (rest == 0 ? 0 : rest * (rest - 1) / 2);
}

// The largest sum of a call: every base at its maximum.
constexpr std::uint64_t largest_sum(Periods periods, std::uint64_t ranks) {
  return ranks * (periods.base - 1) + rank_terms(periods, ranks);
}

constexpr int max_ranks(Periods periods, std::uint64_t exact_limit) {
  std::uint64_t ranks = 1;
  while (largest_sum(periods, ranks + 1) <= exact_limit) ++ranks;
  return int(ranks);
}

}  // namespace

float contribution(comm::GradientDtype dtype, int rank, std::uint64_t index, std::uint64_t call) {
  const Periods periods = periods_of(dtype);
  return float(base(periods, index, call) + std::uint64_t(rank) % periods.rank);
}

float exact_sum(comm::GradientDtype dtype, int ranks, std::uint64_t index, std::uint64_t call) {
  const Periods periods = periods_of(dtype);
  const auto n = std::uint64_t(ranks);
  return float(n * base(periods, index, call) + rank_terms(periods, n));
}

int exact_sum_max_ranks(comm::GradientDtype dtype) {
  static const int float_ranks = max_ranks(float_periods, float_exact_limit);
  static const int bf16_ranks = max_ranks(bf16_periods, bf16_exact_limit);
  return dtype == comm::GradientDtype::bf16 ? bf16_ranks : float_ranks;
}

void fill_contribution(std::span<float> buffer, int rank, std::uint64_t call,
                       comm::GradientDtype dtype, std::uint64_t first_index) {
  for (std::size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = contribution(dtype, rank, first_index + i, call);
}

std::uint64_t count_wrong_elements(std::span<const float> reduced, int ranks, std::uint64_t call,
                                   comm::GradientDtype dtype, std::uint64_t first_index) {
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < reduced.size(); ++i)
    wrong += reduced[i] != exact_sum(dtype, ranks, first_index + i, call);
  return wrong;
}

}  // namespace dlscale::worker
