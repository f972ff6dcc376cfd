// `dlscale predict`'s analysis: for each rank count N, the measured run to carry (the nearest in
// rank count), the compute slowdown from the runs' node-sharing probes, the straggler sample, one
// iteration of the performance model, and the study's own efficiency and gap split
// (scaling_metrics.hpp) against the predicted baseline. Runs can be held out, so that the model
// can be checked against measurements it did not see.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "analysis/performance_model.hpp"
#include "analysis/scaling_metrics.hpp"
#include "results/run_record.hpp"
#include "results/study_record.hpp"

namespace dlscale::analysis {

// Compute slowdown with k ranks computing side by side, from node-sharing probes
// (worker/node_sharing_probe.hpp), per sample: s(k) = the shared pass time per sample at k ranks
// / the mean alone pass time per sample of all the probes; s(1) = 1. So s(N)/s(n) is the ratio of
// the probes' own pass times per sample at N and n ranks (under strong scaling their batches
// differ, as the runs' do).
struct NodeSharingCurve {
  std::vector<std::pair<int, double>> slowdown;  // ascending ranks, (1, 1) first
};

// The probe a training run made before its point (none from a one-rank run, or a file written
// before probes).
std::optional<results::NodeSharingProbe> node_sharing_probe_of(const results::RunRecord& run);

NodeSharingCurve node_sharing_curve(const std::vector<results::NodeSharingProbe>& probes);

// s at N ranks: probed where a probe ran at N, interpolated linearly between probed counts, and
// beyond the largest probed count K at min(N, max(K, ranks_per_node)) ranks on a node: held at s(K)
// when the nodes are as full as K's, else extrapolated linearly through the last two probed
// counts (never below s(K)). `how` says which.
double slowdown_at(const NodeSharingCurve& curve, int ranks, int ranks_per_node, std::string& how);

struct PredictionSettings {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring;
  std::optional<bool> overlap;   // none: as the reference run measured
  int ranks_per_node = 0;        // 0: the most ranks any measured run or probe had on one host
  std::vector<int> held_out;     // measured rank counts whose runs are not predicted from
  bool hold_out_probes = false;  // leave out the held-out runs' node-sharing probes too
  // Scale the sweep's allreduce times to what they were inside training, from a run at the
  // sweep's own rank count (see communication_calibration); off: the sweep's model as it is.
  bool calibrate_communication = true;
  // The runs of this precision are predicted from; empty: the precision of the file's first run.
  std::string precision;
  // And of this strategy (--sharding); none: the strategy of the file's first run.
  std::optional<results::Sharding> sharding;
  // Whether the network model describes the network the runs were measured on (a `dlscale comm`
  // sweep of it), so that a measured point can be compared with its prediction; false for a
  // network the user names (--network), which the runs never ran on.
  bool network_describes_runs = true;
  // Measure the model's error by predicting each measured rank count without its own runs.
  bool measure_model_error = true;
};

// A measured point missing its prediction by more than this (relative, in iteration time) is
// warned about: the model's error there is larger than its inputs' noise explains.
inline constexpr double model_miss_warning = 0.15;

struct PredictedPoint {
  int ranks = 0;
  int reference_ranks = 0;                  // the measured rank count whose compute it carries
  std::vector<std::string> reference_runs;  // its runs (every repeat), by group name in /runs
  Prediction iteration;                     // from the mean over those repeats
  // The same prediction from each repeat alone: the lowest and highest (equal for one repeat),
  // and the efficiencies they give against the baseline's mean.
  double iteration_seconds_low = 0, iteration_seconds_high = 0;
  double efficiency_low = 0, efficiency_high = 0;
  // The interval the prediction claims: the repeats' range and the point estimate, widened by
  // the model's measured error (ScalingPrediction::model_error; the range alone where that is not
  // measured). It always contains the point estimate.
  double interval_seconds_low = 0, interval_seconds_high = 0;
  double interval_efficiency_low = 0, interval_efficiency_high = 0;
  double compute_slowdown = 1;  // s(N) / s(reference)
  std::string slowdown_how;     // probed, interpolated, extrapolated, held, none
  double efficiency = 0, speedup = 0;
  // Why the efficiency is above 1 (faster per sample than linear scaling allows), where it is;
  // empty otherwise.
  std::string above_linear_reason;
  EfficiencyGap gap;
  bool held_out = false;
  // Where N was measured: the study's mean over repeats; NaN elsewhere.
  double measured_iteration_seconds = 0;
  double measured_efficiency = 0;
  // Whether that measurement is compared with the prediction: only where both describe the same
  // network (PredictionSettings::network_describes_runs).
  bool compared = false;

  // Convergence at N ranks, from the B_noise carried to N's global batch (NaN without one): the
  // model's statistical efficiency against the baseline, goodput, and with a target the samples
  // and seconds to it (and the seconds measured, where N was trained to the target).
  double global_batch = 0;
  double statistical_efficiency = nan;
  double goodput_samples_per_second = nan;
  double samples_to_target = nan;
  double seconds_to_target = nan;
  double measured_seconds_to_target = nan;

 private:
  static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
};

struct ScalingPrediction {
  std::string model;
  std::string scaling;                                   // weak or strong
  double batch_per_rank = 0;                             // weak
  double global_batch = 0;                               // strong
  std::string precision;                                 // of the runs predicted from
  results::Sharding sharding = results::Sharding::none;  // theirs too
  int threads_per_rank = 0;
  int baseline_ranks = 0;
  int ranks_per_node = 0;
  NodeSharingCurve node_sharing;
  double communication_scale = 1;  // the calibration applied to every allreduce; 1: none
  // The gradient noise scale carried to every N: the mean B_noise of the runs at the smallest
  // global batch that measured one (NaN: no run of two or more ranks), and the baseline's mean
  // samples to its target (NaN: not trained to one), "accuracy 0.8" or "loss 0.5".
  double noise_scale = std::numeric_limits<double>::quiet_NaN();
  double baseline_samples_to_target = std::numeric_limits<double>::quiet_NaN();
  std::string target;
  std::vector<std::string> notes;  // assumptions and stand-ins, for the reader of the table
  // The model's measured error: the largest relative miss in iteration time at a measured rank
  // count predicted without its own runs (held out, or left out one at a time); NaN where none
  // could be measured (one measured rank count, or a network the runs did not run on).
  double model_error = std::numeric_limits<double>::quiet_NaN();
  std::string model_error_source;     // which rank counts measured it, in words
  std::vector<std::string> warnings;  // measured points missed by more than model_miss_warning
  std::vector<PredictedPoint> points;
};

// Throws UserError where the runs cannot support a prediction (nothing left after the hold-out,
// the baseline held out, a rank to hold out that was not measured).
// `launch_probes`: the file's probes on rank counts the sweep did not train.
ScalingPrediction predict_scaling(const std::vector<results::RunRecord>& runs,
                                  const std::vector<results::NodeSharingProbe>& launch_probes,
                                  const NetworkModel& network, const std::vector<int>& ranks,
                                  const PredictionSettings& settings);

}  // namespace dlscale::analysis
