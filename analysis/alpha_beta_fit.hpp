// Fits the latency-bandwidth (alpha-beta, Hockney) model to an allreduce sweep: the straight line
// t(m) = a + b*m through the per-size times, then the ring allreduce's per-hop alpha and beta for n
// ranks from t = 2(n-1)*alpha + 2(n-1)/n * m * beta (docs/communication.md has the formulas).
// One line rarely describes a whole sweep (MPI changes protocol and algorithm with the size), so
// a piecewise fit gives each range of sizes a line of its own.
#pragma once

#include <span>

#include "results/comm_record.hpp"

namespace dlscale::analysis {

// Weighted least squares minimising the relative error, sum_i ((t_i - a - b*m_i) / t_i)^2, i.e.
// weights 1/t_i^2. Plain least squares would let the largest messages (times 10^4 x longer)
// decide everything and leave the latency a meaningless residue; relative error gives an 8-byte
// and a 64 MiB message the same say. Needs at least two distinct sizes and positive times;
// otherwise every field is NaN. With one rank, alpha and beta are NaN (there is no hop).
// Throws std::invalid_argument unless bytes and seconds have the same length.
results::AlphaBetaFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds,
                                     int ranks);

// The sizes (ascending) split into at most `max_pieces` contiguous ranges of at least
// `min_sizes_per_piece` sizes each, each range fitted as above but with a >= 0 and b >= 0. The
// split minimises the total squared relative error (dynamic programming over the split points);
// the number of pieces is the smallest whose RMS relative error is within 5%, or within 1.25x of
// the best any allowed number reaches. Fewer sizes than one piece needs: one piece of all of them.
// Throws std::invalid_argument unless bytes and seconds have the same length.
inline constexpr int default_max_pieces = 4;
inline constexpr int default_min_sizes_per_piece = 2;
results::PiecewiseAlphaBetaFit fit_piecewise_alpha_beta(
    std::span<const double> bytes, std::span<const double> seconds, int ranks,
    int max_pieces = default_max_pieces, int min_sizes_per_piece = default_min_sizes_per_piece);

// The piece whose sizes hold `bytes`; between two pieces the nearer on a log scale, below the
// first the first, above the last the last. The fit must have at least one piece.
const results::AlphaBetaPiece& piece_for(const results::PiecewiseAlphaBetaFit& fit, double bytes);

// The fitted time of one call of `bytes` bytes on the sweep's own rank count.
double fitted_seconds(const results::PiecewiseAlphaBetaFit& fit, double bytes);

}  // namespace dlscale::analysis
