// Fits the latency-bandwidth (alpha-beta, Hockney) model to an allreduce sweep: the straight line
// t(m) = a + b*m through the per-size times, then the ring allreduce's per-hop alpha and beta for n
// ranks from t = 2(n-1)*alpha + 2(n-1)/n * m * beta (docs/communication.md has the formulas).
#pragma once

#include <span>

#include "results/comm_record.hpp"

namespace dlscale::coordinator {

// Weighted least squares minimising the relative error, sum_i ((t_i - a - b*m_i) / t_i)^2, i.e.
// weights 1/t_i^2. Plain least squares would let the largest messages (times 10^4 x longer)
// decide everything and leave the latency a meaningless residue; relative error gives an 8-byte
// and a 64 MiB message the same say. Needs at least two distinct sizes and positive times;
// otherwise every field is NaN. With one rank, alpha and beta are NaN (there is no hop).
// Throws std::invalid_argument unless bytes and seconds have the same length.
results::AlphaBetaFit fit_alpha_beta(std::span<const double> bytes,
                                     std::span<const double> seconds, int ranks);

}  // namespace dlscale::coordinator
