// The data every rank reduces in `dlscale comm`, chosen so the correct float sum is known exactly:
// each contribution is a small integer, so every partial sum is an integer below 2^24 that float32
// represents exactly, whatever order the reduction adds in. Any wrong element is a real error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dlscale::worker {

// Rank r's value at element i in call c is base(i, c) + r with base(i, c) = (i + 3c) mod 61, so
// the sum over n ranks is n*base + n(n-1)/2. That stays below 2^24 (exact) up to this many ranks.
inline constexpr int exact_sum_max_ranks = 5000;

// Fills `buffer` with rank `rank`'s contribution to call `call`. The call number changes the
// values from one call to the next, so a result left over from an earlier call is caught.
void fill_contribution(std::span<float> buffer, int rank, std::uint64_t call);

// The number of elements of `reduced` that differ from the exact sum over `ranks` ranks of
// their contributions to call `call`.
std::uint64_t count_wrong_elements(std::span<const float> reduced, int ranks, std::uint64_t call);

}  // namespace dlscale::worker
