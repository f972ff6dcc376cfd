// Everything one `dlscale comm` allreduce sweep produces, in memory: what ran where, the raw
// per-rank times, the per-size statistics and the latency-bandwidth fit. The comm writer stores
// exactly this and read_comm restores it; docs/communication.md describes each field in the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlscale::results {

// One message size of the sweep. Times are per call, each call timed at its slowest rank.
struct CommSizeStatistics {
  std::uint64_t bytes = 0;  // count * 4 (float32)
  std::uint64_t count = 0;  // elements per rank
  double seconds_p50 = 0;
  double seconds_p95 = 0;
  double algbw_gbps_p50 = 0;  // bytes / seconds_p50 / 1e9
  double algbw_gbps_p95 = 0;  // bytes / seconds_p95 / 1e9 (the slower calls, so the lower value)
  double busbw_gbps_p50 = 0;  // algbw * 2(n-1)/n
  double busbw_gbps_p95 = 0;
  std::uint64_t wrong_elements = 0;  // summed over ranks and every call, warm-up included
};

// The latency-bandwidth (alpha-beta) model fitted to the p50 times, t(m) = a + b*m, and the ring
// allreduce's per-hop constants derived from it: t = 2(n-1)*alpha + 2(n-1)/n * m * beta.
struct AlphaBetaFit {
  double line_intercept_seconds = 0;  // a
  double line_seconds_per_byte = 0;   // b
  double alpha_seconds = 0;           // a / (2(n-1)); NaN for one rank
  double beta_seconds_per_byte = 0;   // b * n / (2(n-1)); NaN for one rank
  double relative_rms_error = 0;      // sqrt(mean(((t - fit) / t)^2)), what the fit minimises
  double max_relative_error = 0;      // max |t - fit| / t
};

// One piece of a piecewise alpha-beta fit: a contiguous range of the sweep's sizes (one protocol
// or algorithm of the MPI library), with a line of its own through their p50 times. Its intercept
// and slope are held non-negative, so that alpha and beta stay physical at other rank counts.
struct AlphaBetaPiece {
  double min_bytes = 0;  // the smallest size it was fitted to
  double max_bytes = 0;  // the largest
  AlphaBetaFit fit;      // over those sizes; its errors are the piece's own
};

// Lines fitted piece by piece (analysis/alpha_beta_fit.hpp), and their error over all sizes.
// Computed from the p50 times, so `dlscale predict` can also compute it for files written before
// it was stored.
struct PiecewiseAlphaBetaFit {
  std::vector<AlphaBetaPiece> pieces;  // ascending sizes
  double relative_rms_error = 0;
  double max_relative_error = 0;
};

// The sweep again over one kind of link alone, made when a launch has several ranks on each of
// several hosts: "intra_node" sums among the ranks of each host (every host at once),
// "inter_node" among one rank per host. Times are those of the communicator that holds rank 0.
struct LinkSweep {
  std::string link;             // intra_node or inter_node
  int ranks = 0;                // in each communicator
  int communicators = 0;        // summing at the same time
  std::vector<double> seconds;  // [size][measured iteration][rank of rank 0's communicator]
  std::vector<CommSizeStatistics> sizes;
  AlphaBetaFit fit;
  PiecewiseAlphaBetaFit piecewise_fit;
};

struct CommRecord {
  // What made the file.
  std::string dlscale_version;
  std::string git_commit;
  std::string command_line;
  std::string start_time_utc;  // ISO 8601
  std::string mpi_library_version;

  // Where and how it ran.
  std::string backend;
  int ranks = 0;
  std::vector<std::string> rank_hosts;  // [rank]
  int node_count = 0;                   // distinct hosts
  int warmup_iterations = 0;            // per size, left out of the statistics
  int measured_iterations = 0;          // per size

  std::vector<double> seconds;  // [size][measured iteration][rank], each rank's own clock
  std::vector<CommSizeStatistics> sizes;
  AlphaBetaFit fit;
  PiecewiseAlphaBetaFit piecewise_fit;
  // Intra-node and inter-node sweeps, where the launch mixes both kinds of link; empty otherwise
  // (then the whole sweep is of one kind, node_count says which) and in files before them.
  std::vector<LinkSweep> links;

  double call_seconds(std::size_t size, int iteration, int rank) const {
    return seconds[(size * std::size_t(measured_iterations) + std::size_t(iteration)) *
                       std::size_t(ranks) +
                   std::size_t(rank)];
  }
};

}  // namespace dlscale::results
