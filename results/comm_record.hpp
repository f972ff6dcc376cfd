// Everything one `dlscale comm` sweep produces, in memory: what ran where and, for each collective
// and dtype swept, a table: the raw per-rank times out of place and in place, the per-size
// statistics and the latency-bandwidth fit. The comm writer stores exactly this and read_comm
// restores it; docs/communication.md describes each field in the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "results/schema.hpp"

namespace dlscale::results {

// One message size of a table, in one placement (in place or out of place). Times are per call,
// each call timed at its slowest rank.
struct CommSizeStatistics {
  std::uint64_t bytes = 0;  // count * the dtype's bytes (4 for float, 2 for bf16)
  std::uint64_t count = 0;  // elements of the size, as the collective counts it (nccl-tests')
  double seconds_p50 = 0;
  double seconds_p95 = 0;
  double algbw_gbps_p50 = 0;  // bytes / seconds_p50 / 1e9
  double algbw_gbps_p95 = 0;  // bytes / seconds_p95 / 1e9 (the slower calls, so the lower value)
  double busbw_gbps_p50 = 0;  // algbw * the collective's bus factor (2(n-1)/n for an allreduce)
  double busbw_gbps_p95 = 0;
  std::uint64_t wrong_elements = 0;  // summed over ranks and every call, warm-up included
  double seconds_mean = 0;           // nccl-tests' time column
  double seconds_min = 0;
  double seconds_max = 0;
};

// The latency-bandwidth (alpha-beta) model fitted to the p50 times, t(m) = a + b*m, and the per-hop
// constants derived from it under the collective's model, t = steps*alpha + factor * m * beta
// (for a ring allreduce: t = 2(n-1)*alpha + 2(n-1)/n * m * beta).
struct AlphaBetaFit {
  double line_intercept_seconds = 0;  // a
  double line_seconds_per_byte = 0;   // b
  double alpha_seconds = 0;           // a / steps; NaN for one rank
  double beta_seconds_per_byte = 0;   // b / factor; NaN for one rank
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

// The measured calls of one sweep over the sizes, and what is computed from them: raw times and
// statistics in place (the result overwrites the input, as training's sums do) and out of place
// (nccl-tests' first column; absent in files written before it), and the fits to the in-place
// p50 times.
struct SweepTimes {
  std::vector<double> seconds;  // in place, [size][measured iteration][rank], each rank's clock
  std::vector<CommSizeStatistics> sizes;               // in place
  std::vector<double> out_of_place_seconds;            // laid out as `seconds`
  std::vector<CommSizeStatistics> out_of_place_sizes;  // the same bytes and counts as `sizes`
  AlphaBetaFit fit;
  PiecewiseAlphaBetaFit piecewise_fit;
};

// The sweep again over one kind of link alone, made when a launch has several ranks on each of
// several hosts: "intra_node" among the ranks of each host (every host at once), "inter_node"
// among one rank per host. Times are those of the communicator that holds rank 0.
struct LinkSweep {
  std::string link;       // intra_node or inter_node
  int ranks = 0;          // in each communicator
  int communicators = 0;  // running at the same time
  SweepTimes times;       // its last dimension: the ranks of rank 0's communicator
};

// One collective in one dtype over the sweep's sizes: one table of `dlscale comm`'s output.
struct CommTable {
  std::string collective;     // as --collective names it: allreduce, reduce_scatter, ...
  std::string dtype;          // as --dtype names it: float or bf16
  std::string redop = "sum";  // how it combines the ranks' values: sum, or none (it moves them)
  int root = -1;              // the rank whose data a broadcast spreads; -1 for the others
  // busbw = algbw * this (nccl-tests'), and the model t = latency_steps * alpha + this * m * beta.
  double bus_bandwidth_factor = 0;
  double latency_steps = 0;
  SweepTimes times;
  // nccl-tests' "Avg bus bandwidth": the mean busbw p50 over the sizes, out of place and in place.
  double average_busbw_gbps = 0;
  // Intra-node and inter-node sweeps, where the launch mixes both kinds of link; empty otherwise
  // (then the whole sweep is of one kind, node_count says which) and in files before them.
  std::vector<LinkSweep> links;
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

  // In the order swept: collectives in --collective's order, dtypes in --dtype's within each (read
  // back from a file: the first, then the others by collective and dtype name). The first is the
  // file's /comm group itself (an allreduce in float by default, as in every file before the
  // other collectives).
  std::vector<CommTable> tables;
};

// Each call's time on each rank, from a SweepTimes' seconds or out_of_place_seconds.
inline double call_seconds(const std::vector<double>& seconds, int iterations, int ranks,
                           std::size_t size, int iteration, int rank) {
  return seconds[(size * std::size_t(iterations) + std::size_t(iteration)) * std::size_t(ranks) +
                 std::size_t(rank)];
}

// The table of `collective` in float (schema::comm_file's names), or null where the sweep did
// not include it.
inline const CommTable* float_table(const CommRecord& record, std::string_view collective) {
  for (const CommTable& table : record.tables)
    if (table.collective == collective && table.dtype == schema::comm_file::float_dtype)
      return &table;
  return nullptr;
}

// The table of an allreduce in float: what `dlscale predict` models gradient sums with. Null
// where the sweep did not include it.
inline const CommTable* float_allreduce_table(const CommRecord& record) {
  return float_table(record, schema::comm_file::allreduce_collective);
}

}  // namespace dlscale::results
