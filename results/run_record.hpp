// Everything one run produces, in memory: configuration, environment, raw per-rank timings and
// losses, and the coordinator's summary. The writer stores exactly this; the reader restores it.
// docs/results-format.md describes each field as it appears in the HDF5 file.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/enum_names.hpp"
#include "core/phases.hpp"
#include "results/measurement.hpp"

namespace dlscale::results {

// The scaling mode recorded with a run: weak (--batch per rank), strong (--global-batch split
// over the ranks), or none for a single plain run.
enum class Scaling { none, weak, strong };

// As --scaling and results files spell them.
inline constexpr EnumNames<Scaling, 3> scaling_names{{"none", "weak", "strong"}};
inline const char* scaling_name(Scaling scaling) { return scaling_names(scaling); }

// How each point's learning rate follows its global batch (--lr-scaling): kept, in proportion to
// it, or in proportion to its square root (Goyal et al. 2017; Krizhevsky 2014).
enum class LearningRateScaling { none, linear, sqrt };
inline constexpr EnumNames<LearningRateScaling, 3> learning_rate_scaling_names{
    {"none", "linear", "sqrt"}};

// The optimizer every point trains with (--optimizer): SGD with heavy-ball momentum, or AdamW
// (Loshchilov and Hutter 2019: Adam with decoupled weight decay, as torch.optim.AdamW).
enum class OptimizerKind { sgd, adamw };
inline constexpr EnumNames<OptimizerKind, 2> optimizer_names{{"sgd", "adamw"}};

// How the ranks of a point share the work of the update (--sharding): none, every rank sums every
// gradient and updates every parameter (DDP); optimizer (ZeRO stage 1) and gradients (stage 2),
// gradients reduce-scattered, each rank updating its own shard of the parameters and optimizer
// state, the parameters all-gathered after; full (stage 3, FSDP), parameters sharded too.
enum class Sharding { none, optimizer, gradients, full };
inline constexpr EnumNames<Sharding, 4> sharding_names{{"none", "optimizer", "gradients", "full"}};
// Whom a sharded point shards over (--sharding-group): every rank, or the ranks of each host with
// the shards replicated across hosts (hybrid sharding, HSDP).
enum class ShardingGroup { all, node };
inline constexpr EnumNames<ShardingGroup, 2> sharding_group_names{{"all", "node"}};

// What a held-out evaluation is held to when a run trains to a target (--target-accuracy,
// --target-loss).
enum class TargetMetric { accuracy, loss };
inline constexpr EnumNames<TargetMetric, 2> target_metric_names{{"accuracy", "loss"}};

// One held-out evaluation: accuracy and mean loss on a validation set never trained on, after
// iteration + 1 steps had trained on `samples` samples (all ranks) in `training_seconds` on the
// run clock, time spent evaluating left out.
struct Evaluation {
  int iteration = 0;
  double samples = 0;
  double training_seconds = 0;
  double accuracy = 0;
  double loss = 0;
};

// A target to train to: a held-out accuracy to reach or a loss to get under.
struct Target {
  TargetMetric metric = TargetMetric::accuracy;
  double value = 0;
  // The one test of whether an evaluation meets the target.
  bool met_by(const Evaluation& evaluation) const {
    return metric == TargetMetric::accuracy ? evaluation.accuracy >= value
                                            : evaluation.loss <= value;
  }
  const char* metric_name() const { return target_metric_names(metric); }
};

struct RunConfiguration {
  std::string model;
  std::string model_family;
  std::string model_description;
  std::uint64_t parameter_count = 0;
  double training_flops_per_sample = 0;
  // A language model's tokens per sample (a sample is one sequence); 0 for other models, and in
  // files before schema 10, which did not record it.
  int tokens_per_sample = 0;
  int batch_per_rank = 0;
  int warmup_iterations = 0;
  int measured_iterations = 0;
  int threads_per_rank = 0;
  int repeat = 0;  // which run of the same sweep point (--repeat), from 0
  std::string comm_backend;
  std::string gradient_dtype = "fp32";  // what the ranks summed: fp32 or bf16
  std::string device;
  std::string precision = "fp32";  // what the device computed in (--precision)
  std::uint64_t seed = 0;
  double learning_rate = 0;
  OptimizerKind optimizer = OptimizerKind::sgd;
  Sharding sharding = Sharding::none;                 // --sharding
  ShardingGroup sharding_group = ShardingGroup::all;  // --sharding-group
  double momentum = 0;      // SGD's momentum, or AdamW's beta1 (its first moment's decay)
  double weight_decay = 0;  // AdamW's decoupled weight decay; 0 for SGD
  std::string scaling = scaling_name(Scaling::none);  // a scaling_name(), as the file holds it
  double bucket_mb = 0;                               // gradient bucket size, MiB
  bool overlap = false;                               // bucket sums started during backward
  // The learning-rate rule for large batches (--lr-scaling), the rate it scaled (learning_rate is
  // the one trained with, after the rule) and its linear warm-up.
  LearningRateScaling learning_rate_scaling = LearningRateScaling::none;
  double base_learning_rate = 0;
  int learning_rate_warmup_steps = 0;
  int evaluate_every = 0;        // held-out evaluation after every this many iterations; 0: none
  std::optional<Target> target;  // where the run trained to one
};

// The target a run trained to, where it had one: the first evaluation that met it. The target was
// crossed somewhere after the evaluation before it (the start, 0, where the first met it), so
// the previous evaluation's samples and seconds bound what the evaluation spacing can resolve.
struct TargetReached {
  int iterations = 0;
  double samples = 0;
  double training_seconds = 0;
  double previous_samples = 0;
  double previous_training_seconds = 0;
};

// The Slurm job a run was part of, as its SLURM_* environment said; empty strings outside Slurm.
struct SlurmAllocation {
  std::string job_id;          // SLURM_JOB_ID
  std::string job_name;        // SLURM_JOB_NAME
  std::string node_list;       // SLURM_JOB_NODELIST, compressed as Slurm writes it: node[01-04]
  std::string tasks_per_node;  // SLURM_TASKS_PER_NODE, e.g. 4(x2)
  std::string cpus_per_task;   // SLURM_CPUS_PER_TASK, when the job asked for it
  std::string array_task_id;   // SLURM_ARRAY_TASK_ID, in a job array
  // Whether the job had its nodes to itself: "yes", "no", or "unknown" outside Slurm and where
  // the batch script did not say (slurm/dlscale-run.sbatch sets DLSCALE_NODE_EXCLUSIVE).
  std::string node_exclusive = "unknown";
};

struct RunEnvironment {
  std::string dlscale_version;
  std::string git_commit;
  std::string command_line;
  std::string start_time_utc;  // ISO 8601
  std::string mpi_library_version;
  std::string blas;
  std::string cpu_model;
  // What the device says of itself (GPU model, driver and library versions, clocks), by name.
  std::vector<std::pair<std::string, std::string>> device_properties;
  // GFLOP/s of a square float GEMM on rank 0's device, measured in this run: the faster of its
  // measurements before and after the run's measured iterations; 0 where not measured.
  double device_gemm_gflops = 0;
  // Each of the two measurements, so that a reader sees whether the rate moved during the run;
  // 0 where not measured: `after` in a run stopped by a signal, both in files from before them.
  double device_gemm_gflops_before = 0;
  double device_gemm_gflops_after = 0;
  // Rank 0's memory estimate per rank before the point allocated anything (worker/memory_plan:
  // network, optimizer state, shards and unit buffers, data); 0 where not estimated (files before).
  double memory_estimate_bytes = 0;
  std::vector<std::string> rank_hosts;  // host name of each rank, in rank order
  int node_count = 0;                   // distinct hosts
  int ranks_per_node = 0;               // the most ranks on any one host
  int launch_world_size = 0;            // ranks of the whole launch; a sweep point may use fewer
  // A ring allreduce in rank order passes data from each rank to the next: how many of those
  // hops stay inside a host (shared memory) and how many cross between hosts (the network).
  int intra_host_ring_hops = 0;
  int inter_host_ring_hops = 0;
  SlurmAllocation slurm;

  // Sets the ring hops from rank_hosts.
  void count_ring_hops() {
    intra_host_ring_hops = inter_host_ring_hops = 0;
    const std::size_t ranks = rank_hosts.size();
    if (ranks < 2) return;
    for (std::size_t r = 0; r < ranks; ++r)
      ++(rank_hosts[r] == rank_hosts[(r + 1) % ranks] ? intra_host_ring_hops
                                                      : inter_host_ring_hops);
  }
};

// A top-level layer of the network, forward order.
struct LayerRecord {
  std::string kind;
  std::uint64_t parameter_count = 0;
};

// Gradients reduced by one allreduce: whole layers first_layer..last_layer, inclusive.
struct BucketRecord {
  int first_layer = 0;
  int last_layer = 0;
  double bytes = 0;
};

// The statistics reported for each phase, in this order.
inline constexpr std::array<const char*, 6> statistic_names = {"median", "mean", "p5",
                                                               "p95",    "min",  "max"};

struct PhaseStatistics {
  double median = 0, mean = 0, p5 = 0, p95 = 0, min = 0, max = 0;
};

struct RunSummary {
  std::array<PhaseStatistics, phase_count> phase_statistics{};  // seconds, measured iterations
  double throughput_samples_per_second = 0;                     // whole job
  double communication_fraction = 0;  // allreduce time / step time, all ranks
  double allreduce_bytes = 0;         // gradient bytes reduced per step
  double allreduce_seconds = 0;       // median over iterations of the fastest rank's allreduce
  double allreduce_algbw_gbps = 0;
  double allreduce_busbw_gbps = 0;
  std::vector<double> gflops_per_rank;         // achieved, from each rank's median step
  std::vector<double> load_imbalance_seconds;  // per measured iteration: max - min compute
  bool parameters_identical = false;           // every rank's final parameter fingerprint equal
  // What users of language models and of MFU read (schema 10; derived, by the functions below,
  // from the numbers above for earlier files): the job's tokens per second, NaN for a model
  // without tokens, and the model FLOPs utilisation, NaN where no yardstick was measured.
  double tokens_per_second = std::numeric_limits<double>::quiet_NaN();
  double model_flops_utilisation = std::numeric_limits<double>::quiet_NaN();
  // The gradient noise scale over the measured iterations (analysis/gradient_noise_scale.hpp):
  // B_noise in samples with its 95% interval, and the |G|^2 and tr(Sigma) it is the ratio of.
  // NaN where there is none, and noise_scale_absent_reason says why (one rank, ...).
  double noise_scale = std::numeric_limits<double>::quiet_NaN();
  double noise_scale_ci_low = std::numeric_limits<double>::quiet_NaN();
  double noise_scale_ci_high = std::numeric_limits<double>::quiet_NaN();
  double gradient_squared_norm = std::numeric_limits<double>::quiet_NaN();
  double gradient_trace_covariance = std::numeric_limits<double>::quiet_NaN();
  int noise_scale_iterations = 0;  // the measured iterations that read the norms
  std::string noise_scale_absent_reason;
  std::optional<TargetReached> target_reached;
};

// The achieved GFLOP/s of one rank of the run: the mean over its ranks of gflops_per_rank (each
// from the rank's median step); 0 without any.
inline double mean_gflops_per_rank(const std::vector<double>& gflops_per_rank) {
  double sum = 0;
  for (const double gflops : gflops_per_rank) sum += gflops;
  return gflops_per_rank.empty() ? 0 : sum / double(gflops_per_rank.size());
}

// A language model's throughput in tokens: samples (sequences) per second times the tokens of
// each; NaN for a model without tokens (tokens_per_sample 0).
inline double tokens_per_second(double samples_per_second, int tokens_per_sample) {
  return tokens_per_sample > 0 ? samples_per_second * tokens_per_sample
                               : std::numeric_limits<double>::quiet_NaN();
}

// Model FLOPs utilisation, as PaLM (Chowdhery et al. 2022, appendix B) and torchtitan define it:
// the model FLOP/s a rank achieved (training_flops_per_sample x its samples per second, so the
// FLOPs the model needs, not those the kernels ran) over the device's peak. dlscale keeps no
// vendor peak table: the peak is the GEMM it measured on this device in this run at the run's
// precision (device_gemm_gflops), so this is MFU against the GEMM measured on this device. NaN
// where none was measured.
inline double model_flops_utilisation(double achieved_gflops_per_rank, double peak_gflops) {
  return peak_gflops > 0 ? achieved_gflops_per_rank / peak_gflops
                         : std::numeric_limits<double>::quiet_NaN();
}

// The per-iteration measurements that the noise scale is estimated from (worker/training_loop).
inline constexpr const char* local_gradient_squared_norm = "local_gradient_squared_norm";
inline constexpr const char* global_gradient_squared_norm = "global_gradient_squared_norm";

struct RunRecord {
  RunConfiguration configuration;
  RunEnvironment environment;
  int iterations = 0;  // warm-up included
  int ranks = 0;
  std::vector<double> phase_seconds;          // [iteration][rank][phase]
  std::vector<double> communication_seconds;  // [iteration][rank], first bucket start to last done
  std::vector<double> loss;                   // [iteration][rank]
  std::vector<LayerRecord> layers;
  std::vector<double> layer_backward_seconds;         // [iteration][rank][layer]
  std::vector<BucketRecord> buckets;                  // in the order their sums start
  std::vector<std::uint64_t> parameter_fingerprints;  // [rank]
  std::vector<std::uint64_t> local_ranks;             // [rank]: its index among its host's ranks
  // Everything the samplers measured (resources, energy, peak RSS) and the iteration end times,
  // in the order the ranks made them.
  std::vector<MeasurementRecord> measurements;
  std::vector<Evaluation> evaluations;  // held-out, in order; empty without --eval-every
  RunSummary summary;
  // Empty for a run that completed; else why it stopped early ("interrupted by SIGTERM after 7
  // of 20 measured iterations"). Its measured_iterations count what it kept.
  std::string partial_reason;

  // The measurement of that name, or null.
  const MeasurementRecord* measurement(std::string_view name) const {
    for (const auto& m : measurements)
      if (m.name == name) return &m;
    return nullptr;
  }

  double seconds(int iteration, int rank, Phase phase) const {
    return phase_seconds[(std::size_t(iteration) * ranks + rank) * phase_count + index_of(phase)];
  }
};

}  // namespace dlscale::results
