// The what-if model behind `dlscale predict`: a measured run's compute (forward, per-layer
// backward, update, stragglers) plus an alpha-beta network model of each bucket's allreduce,
// replayed on the bucket order, with or without overlap, for any rank count.
//
// Allreduce of m bytes over N ranks, alpha = per-message latency, beta = seconds per byte:
//   ring: 2(N-1) alpha + 2(N-1)/N m beta            (bandwidth-optimal; NCCL's and MPI's large-message choice)
//   tree: 2 ceil(log2 N) alpha + 2 m beta           (pipelined double binary tree; latency-optimal)
// Overlap: bucket b can start once backward has produced its lowest layer and bucket b-1 is
// done; only what ends after backward is exposed. Without overlap every bucket is exposed.
#pragma once

#include <string>
#include <vector>

#include "results/run_record.hpp"

namespace dlscale::coordinator {

struct NetworkModel {
  double alpha_seconds = 0;
  double beta_seconds_per_byte = 0;
  std::string source;  // where alpha and beta came from, for the report
};

enum class AllreduceAlgorithm { ring, tree };

double allreduce_seconds(const NetworkModel& network, AllreduceAlgorithm algorithm, int ranks,
                         double bytes);

// A measured run reduced to what the model needs: means over its measured iterations and ranks.
struct ComputeProfile {
  int ranks = 0;       // of the run it was measured in
  int batch_per_rank = 0;
  double forward_seconds = 0, update_seconds = 0;
  std::vector<double> layer_backward_seconds;  // per layer, forward order
  double straggler_wait_seconds = 0;           // mean of max - mean compute over ranks
  std::vector<results::BucketRecord> buckets;
  bool overlap = false;
};

ComputeProfile profile_of(const results::RunRecord& run);

struct Prediction {
  int ranks = 0;
  double iteration_seconds = 0;
  double compute_seconds = 0;            // forward + backward + update
  double communication_seconds = 0;      // every bucket's allreduce, hidden or not
  double exposed_communication_seconds = 0;
  double straggler_wait_seconds = 0;
};

// One iteration at `ranks` ranks with `batch_per_rank` samples each. Compute scales linearly
// with the batch from the profile's; the stragglers' wait is carried over in proportion.
Prediction predict_iteration(const ComputeProfile& profile, const NetworkModel& network,
                             AllreduceAlgorithm algorithm, bool overlap, int ranks,
                             double batch_per_rank);

}  // namespace dlscale::coordinator
