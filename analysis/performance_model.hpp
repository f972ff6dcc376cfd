// The what-if model behind `dlscale predict`, for one iteration at N ranks: a measured run's
// compute (forward, per-layer backward, update), slowed by how full the nodes are (the runs'
// node-sharing probes), plus the expected wait for the slowest of N ranks (order statistics of
// the measured per-rank, per-iteration compute), plus an alpha-beta network model of each
// bucket's allreduce, replayed on the bucket order, with or without overlap.
//
// Allreduce of m bytes over N ranks, per-hop latency alpha and seconds per byte beta:
//   ring: 2(N-1) alpha + 2(N-1)/N m beta            (bandwidth-optimal; NCCL's and MPI's
//   large-message choice) tree: 2 ceil(log2 N) alpha + 2 m beta           (pipelined double binary
//   tree; latency-optimal)
// alpha and beta depend on the message size (a piecewise fit) and on the link: a ring whose ranks
// span nodes has intra-node and inter-node hops, and each of its steps lasts as long as the slower.
// Overlap: bucket b can start once backward has produced its lowest layer and bucket b-1 is
// done; only what ends after backward is exposed. Without overlap every bucket is exposed.
// docs/scaling-model.md explains each part and how well it holds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "results/comm_record.hpp"
#include "results/run_record.hpp"

namespace dlscale::analysis {

// Per-hop alpha and beta of the two kinds of link, each by message size. A link's latency is its
// smallest messages' alpha (the first piece's); what a larger piece's line adds above that latency
// is carried to other rank counts as bandwidth, at the busbw the sweep measured for that size.
struct NetworkModel {
  results::PiecewiseAlphaBetaFit intra_node;  // hops between ranks of one node (shared memory)
  results::PiecewiseAlphaBetaFit inter_node;  // hops between nodes (the network)
  std::string source;                         // where they came from, for the report
  std::vector<std::string> notes;             // what stood in for what was not measured
  int intra_node_ranks = 0;  // the rank count each link was fitted on; 0 for a network by hand
  int inter_node_ranks = 0;
  int measured_ranks = 0;  // the whole sweep's rank count; 0 for a network given by hand
  // The sweep's own reduce-scatter and all-gather in float (the sharded strategies'), where it
  // measured them; null: this model's per-hop alpha and beta stand in for theirs.
  std::shared_ptr<const NetworkModel> reduce_scatter = nullptr, all_gather = nullptr;
};

// One alpha and beta for every hop and size (`--network BANDWIDTH,LATENCY`).
NetworkModel uniform_network(double alpha_seconds, double beta_seconds_per_byte,
                             std::string source);

// From a `dlscale comm` sweep: its float allreduce's piecewise fit (computed from its p50 times
// for files written before it was stored), for the links it measured; a link it did not measure
// borrows the other's, and a note says so. Its float reduce-scatter and all-gather the same way,
// where it swept them. Throws UserError for a sweep without a float allreduce
// or on one rank (no hop to fit).
NetworkModel network_of_sweep(const results::CommRecord& sweep, const std::string& path);

enum class AllreduceAlgorithm { ring, tree };
inline constexpr EnumNames<AllreduceAlgorithm, 2> allreduce_algorithm_names{{"ring", "tree"}};

// A link's cost of one hop for a message of `bytes`: its latency (the first piece's alpha) and
// the seconds per byte that, with that latency, give the piece's own line on the sweep's rank
// count: beta + (alpha_piece - alpha_latency) * sweep_ranks / bytes, never below 0.
struct HopCost {
  double alpha_seconds = 0;
  double beta_seconds_per_byte = 0;
};
HopCost hop_cost(const results::PiecewiseAlphaBetaFit& link, int sweep_ranks, double bytes);

// One allreduce of `bytes` over `ranks` ranks placed `ranks_per_node` to a node, in rank order.
double allreduce_seconds(const NetworkModel& network, AllreduceAlgorithm algorithm, int ranks,
                         int ranks_per_node, double bytes);

// One ring reduce-scatter (or all-gather) of a buffer of `bytes` whole: N-1 steps of m/N bytes,
// (N-1) alpha + (N-1)/N m beta, at the alpha and beta of the sweep's own reduce-scatter
// (all-gather) where it measured one, else the allreduce's.
double reduce_scatter_seconds(const NetworkModel& network, int ranks, int ranks_per_node,
                              double bytes);
double all_gather_seconds(const NetworkModel& network, int ranks, int ranks_per_node, double bytes);

// The expected maximum of N draws (with replacement) from `sample`, minus the sample's mean:
// sum_j x_(j) [(j/S)^N - ((j-1)/S)^N] - mean, with x_(1) <= ... <= x_(S). It is exact for the
// empirical distribution, so it is a bootstrap without random numbers. 0 for N = 1 or an empty
// sample. It cannot exceed the sample's maximum, so for N much above the sample's size it
// underestimates a tail that the sample did not see.
double expected_excess_of_maximum(std::vector<double> sample, int ranks);

// A measured run reduced to what the model needs: means over its measured iterations and ranks.
struct ComputeProfile {
  int ranks = 0;  // of the run it was measured in
  int batch_per_rank = 0;
  double forward_seconds = 0, update_seconds = 0;
  std::vector<double> layer_backward_seconds;  // per layer, forward order
  double straggler_wait_seconds = 0;           // measured: mean of max - mean compute over ranks
  // How one rank's compute in one iteration departs from the mean of all ranks in that iteration,
  // scaled by sqrt(n/(n-1)) so that its spread is a single rank's; the straggler model's sample.
  // From one rank: the departures of its iterations from their mean (see scaling-model.md).
  std::vector<double> compute_deviations;
  std::vector<results::BucketRecord> buckets;  // the units of sharding, under --sharding full
  bool overlap = false;
  results::Sharding sharding = results::Sharding::none;
};

ComputeProfile profile_of(const results::RunRecord& run);

// The repeats of one configuration as one profile: the mean of their times (each repeat counts
// once, as each counts once in the study's mean over repeats) and their compute departures
// pooled. The buckets and overlap are the first repeat's (a configuration's repeats share them).
ComputeProfile mean_profile(const std::vector<ComputeProfile>& repeats);

// The compute departures of a run as ComputeProfile::compute_deviations defines them.
std::vector<double> compute_deviations_of(const results::RunRecord& run);

struct Prediction {
  int ranks = 0;
  double iteration_seconds = 0;
  double compute_seconds = 0;             // forward + backward + update
  double communication_seconds = 0;       // every bucket's allreduce, hidden or not
  double communication_span_seconds = 0;  // first bucket's start to last bucket's end
  double exposed_communication_seconds = 0;
  double straggler_wait_seconds = 0;
};

// How to carry a profile to N ranks.
struct Scaling {
  int ranks = 1;
  int ranks_per_node = 1;          // for the network model's links
  double batch_per_rank = 0;       // compute scales linearly with it from the profile's
  double compute_slowdown = 1;     // node sharing at N against the profile's run: s(N)/s(n)
  double communication_scale = 1;  // every allreduce's modelled time times this
  bool overlap = true;
};

// One iteration: T = compute + exposed communication + stragglers' wait, for the profile's
// strategy (docs/scaling-model.md, "Sharded strategies"):
//   none: each bucket allreduced as backward produces it;
//   optimizer, gradients (ZeRO-1, 2): each bucket reduce-scattered the same way, then every
//     bucket all-gathered after the update, exposed; the update covers 1/N of the parameters;
//   full (ZeRO-3): each unit all-gathered before its forward (the next one prefetched while it
//     computes) and again before its backward (but the two units still held from forward), and
//     reduce-scattered after its backward; forward's share of each unit is its backward's.
Prediction predict_iteration(const ComputeProfile& profile, const NetworkModel& network,
                             AllreduceAlgorithm algorithm, const Scaling& scaling);

// The mean over a run's measured iterations of its shortest communication span (first bucket's
// start to last bucket's end) over the ranks: the rank that came last to the sums waited for no
// one, so its span is the sums' own. 0 for one rank.
double measured_communication_span_seconds(const results::RunRecord& run);

// The communication_scale that makes the model's span at `scaling` (the profile's own run) equal
// `measured_span_seconds`: how much longer the sums took inside training than the sweep's fit
// says. 1 where the model or the run has no span.
double communication_calibration(const ComputeProfile& profile, const NetworkModel& network,
                                 AllreduceAlgorithm algorithm, Scaling scaling,
                                 double measured_span_seconds);

}  // namespace dlscale::analysis
