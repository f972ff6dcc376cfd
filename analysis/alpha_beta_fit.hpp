// Fits the latency-bandwidth (alpha-beta, Hockney) model to a collective's sweep: the straight line
// t(m) = a + b*m through the per-size times, then the per-hop alpha and beta of the collective's
// model, t = steps*alpha + factor * m * beta (for the ring allreduce on n ranks,
// t = 2(n-1)*alpha + 2(n-1)/n * m * beta; docs/communication.md has the formulas). One line rarely
// describes a whole sweep (MPI changes protocol and algorithm with the size), so a piecewise fit
// gives each range of sizes a line of its own.
#pragma once

#include <span>

#include "results/comm_record.hpp"

namespace dlscale::analysis {

// The per-hop model of one call: t = latency_steps * alpha + bandwidth_factor * m * beta. With no
// step or no factor (one rank: no hop), alpha and beta are NaN and only the line is fitted.
struct HopModel {
  double latency_steps = 0;
  double bandwidth_factor = 0;
};

// The ring allreduce's on `ranks` ranks: 2(n-1) steps, each rank sending 2(n-1)/n of the message.
HopModel ring_allreduce_hops(int ranks);

// Whether a fit's per-hop alpha is a latency, or why not.
enum class AlphaMeaning {
  latency,              // between 0 and the smallest measured time
  negative,             // below 0: a collapse of bandwidth at large sizes pulls the line down
  above_smallest_time,  // above the smallest time, which no step of a call can take longer than
  no_alpha,             // NaN: fewer than two sizes, or no hop (one rank)
};

// What the alpha of `fit` is, against the smallest of `seconds` (the times it was fitted to).
AlphaMeaning alpha_meaning(const results::AlphaBetaFit& fit, std::span<const double> seconds);

// Weighted least squares minimising the relative error, sum_i ((t_i - a - b*m_i) / t_i)^2, i.e.
// weights 1/t_i^2. Plain least squares would let the largest messages (times 10^4 x longer)
// decide everything and leave the latency a meaningless residue; relative error gives an 8-byte
// and a 64 MiB message the same say. Needs at least two distinct sizes and positive times;
// otherwise every field is NaN. Without a hop in `hops`, alpha and beta are NaN.
// Throws std::invalid_argument unless bytes and seconds have the same length.
results::AlphaBetaFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds,
                                     HopModel hops);

// The sizes (ascending) split into at most `max_pieces` contiguous ranges of at least
// `min_sizes_per_piece` sizes each, each range fitted as above but with a >= 0 and b >= 0. The
// split minimises the total squared relative error (dynamic programming over the split points);
// the number of pieces is the smallest whose RMS relative error is within 5%, or within 1.25x of
// the best any allowed number reaches. Fewer sizes than one piece needs: one piece of all of them.
// Throws std::invalid_argument unless bytes and seconds have the same length.
inline constexpr int default_max_pieces = 4;
inline constexpr int default_min_sizes_per_piece = 2;
results::PiecewiseAlphaBetaFit fit_piecewise_alpha_beta(
    std::span<const double> bytes, std::span<const double> seconds, HopModel hops,
    int max_pieces = default_max_pieces, int min_sizes_per_piece = default_min_sizes_per_piece);

// The piece whose sizes hold `bytes`; between two pieces the nearer on a log scale, below the
// first the first, above the last the last. The fit must have at least one piece.
const results::AlphaBetaPiece& piece_for(const results::PiecewiseAlphaBetaFit& fit, double bytes);

// The fitted time of one call of `bytes` bytes on the sweep's own rank count.
double fitted_seconds(const results::PiecewiseAlphaBetaFit& fit, double bytes);

}  // namespace dlscale::analysis
