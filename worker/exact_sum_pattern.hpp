// The data every rank sends in `dlscale comm`, chosen so the correct result of every collective is
// known exactly: each contribution is a small integer, so every partial sum is an integer that the
// dtype represents exactly (below 2^24 in float32, at most 256 in bf16's 8 significant bits),
// whatever order a reduction adds in. Any wrong element is a real error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/gradient_communicator.hpp"

namespace dlscale::worker {

// Rank r's value at element i in call c is base(i, c) + (r mod rank_period), with
// base(i, c) = (i + 3c) mod base_period: float32 uses 61 and no wrap of the rank term (the rank
// itself), bf16 uses 5 and 8, to keep sums small.
float contribution(comm::GradientDtype dtype, int rank, std::uint64_t index, std::uint64_t call);

// The sum of every rank's contribution at element i of call c: n*base(i, c) plus the sum of the
// rank terms, a closed form.
float exact_sum(comm::GradientDtype dtype, int ranks, std::uint64_t index, std::uint64_t call);

// The most ranks whose sums stay exact in `dtype`: 5733 in float32, 35 in bf16. The other
// collectives move contributions without adding them and are exact at any rank count.
int exact_sum_max_ranks(comm::GradientDtype dtype);

// Fills `buffer` with rank `rank`'s contributions to call `call` at elements first_index,
// first_index + 1, .... The call number changes the values from one call to the next, so a
// result left over from an earlier call is caught.
void fill_contribution(std::span<float> buffer, int rank, std::uint64_t call,
                       comm::GradientDtype dtype = comm::GradientDtype::fp32,
                       std::uint64_t first_index = 0);

// The number of elements of `reduced` (elements first_index, first_index + 1, ...) that differ
// from the exact sum over `ranks` ranks of their contributions to call `call`.
std::uint64_t count_wrong_elements(std::span<const float> reduced, int ranks, std::uint64_t call,
                                   comm::GradientDtype dtype = comm::GradientDtype::fp32,
                                   std::uint64_t first_index = 0);

}  // namespace dlscale::worker
