// Options of `dlscale run`, parsed from the command line and an optional --config file, and
// validated here, so nothing past the CLI layer sees an unchecked or stringly-typed value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator_factory.hpp"
#include "kernels/device_factory.hpp"
#include "results/run_record.hpp"

namespace dlscale::cli {

struct RunOptions {
  enum class Action { train, show_help, show_version, list_models };
  Action action = Action::train;

  std::string model = "fcn-r";
  std::optional<int> batch;  // per rank; unset means the workload's reference CPU batch
  int measured_iterations = 20;
  int warmup_iterations = 3;
  std::vector<int> threads{1};  // compute threads per rank; several: a thread sweep, ascending
  int repeats = 1;              // runs of each sweep point, each with its own seed
  std::string comm = comm::backend_record(comm::Backend::mpi).name;
  // What the ranks sum: fp32, or bf16 (half the bytes), as comm::GradientDtype.
  std::string grad_dtype = comm::gradient_dtype_names(comm::GradientDtype::fp32);
  std::string device = kernels::device_record(kernels::DeviceKind::cpu).name;
  // Float math of GEMMs and convolutions; several: a precision sweep, in the order given.
  std::vector<kernels::Precision> precisions{kernels::Precision::fp32};
  std::uint64_t seed = 42;
  double learning_rate = 0.01;
  results::OptimizerKind optimizer = results::OptimizerKind::sgd;
  std::vector<results::Sharding> shardings{results::Sharding::none};  // each a sweep dimension
  // Rank sweep: "1,2,4", "all" (powers of two up to the launch's size, and the size itself) or
  // empty for one run on every rank. Resolved against the launch by sweep_rank_counts().
  std::string ranks;
  // Of a sweep: weak (--batch per rank) or strong.
  std::string scaling = results::scaling_name(results::Scaling::weak);
  bool scaling_given = false;
  std::optional<int> global_batch;  // strong scaling: split over the ranks of each point
  double bucket_mb = 25;            // gradient bucket size; 0 = one bucket
  double shard_unit_mb = 25;        // --sharding full: parameters gathered per unit
  results::ShardingGroup sharding_group = results::ShardingGroup::all;
  bool overlap = true;                   // sum buckets during backward (non-blocking)
  double sample_interval_seconds = 0.2;  // resource sampling; 0 turns it off
  double point_timeout_seconds = 0;      // a sweep point running longer fails; 0: no limit
  double stall_timeout_seconds = -1;     // see coordinator::StallSettings: -1 automatic, 0 off
  bool oversubscribe = false;            // allow more threads per rank than logical CPUs
  bool probe_node_sharing = true;        // the node-sharing probe for `dlscale predict` (--probe)
  bool gemm_yardstick = true;  // the GEMM rate before and after each point (--no-yardstick)

  // Convergence: held-out evaluation, a target to train each point to, and the large-batch
  // learning-rate rule (Goyal et al. 2017).
  int evaluate_every = 0;                 // iterations between evaluations; 0: none
  int evaluation_samples = 512;           // the validation set, over all ranks
  std::optional<results::Target> target;  // none: train --iters iterations
  long long max_samples = 262144;         // with a target: samples (all ranks) a point may train on
  results::LearningRateScaling learning_rate_scaling = results::LearningRateScaling::none;
  int learning_rate_batch = 0;  // the global batch --lr is for; 0: the sweep's smallest
  int learning_rate_warmup_steps = 0;

  std::string output_path;  // empty: a default name made from the model, ranks and time
  bool overwrite = false;
  bool quiet = false;       // one line per point, not its whole summary
  std::string config_path;  // the --config file read, if any: an input the run must not replace
  std::string log_level = "info";
};

// `arguments` excludes the program name and subcommand. Throws UserError naming the option.
RunOptions parse_run_options(const std::vector<std::string>& arguments);

// The rank counts of the sweep, ascending, for a launch of `world_size` ranks; {world_size} when
// no sweep was asked for. Throws UserError for a malformed list or a count above world_size.
std::vector<int> sweep_rank_counts(const RunOptions& options, int world_size);

// Samples per rank at each rank count: --batch (or the model's `default_batch`) for weak
// scaling, --global-batch / n for strong. Throws UserError if the global batch does not split
// evenly over some rank count.
std::vector<int> batches_per_rank(const RunOptions& options, const std::vector<int>& rank_counts,
                                  int default_batch);

// The scaling mode recorded with the runs: weak, strong, or none for a single plain run.
results::Scaling recorded_scaling(const RunOptions& options);

std::string run_help_text();

}  // namespace dlscale::cli
