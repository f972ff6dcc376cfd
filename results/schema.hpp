// The names in a dlscale results file, defined once for the writer, the reader and the schema
// test. docs/results-format.md documents each one; bump schema_version when the layout changes.
#pragma once

namespace dlscale::results::schema {

inline constexpr long long version = 10;
// Files before tokens per second and MFU: no `tokens_per_sample` run attribute (read as 0, so no
// tokens per second), no `tokens_per_second` and `mfu` summary attributes (derived on reading
// from what the file holds) and no such columns in /study (NaN); still read.
inline constexpr long long before_model_rates_version = 9;
// Files before --sharding: no `sharding` run attribute and no `sharding` column in /study and
// /study_repeats (every run replicated: none); still read.
inline constexpr long long before_sharding_version = 8;
// Files before the gradient noise scale, held-out evaluations and targets (none of them); still
// read.
inline constexpr long long before_goodput_version = 7;
// Files before runs, study rows, failed points and probes recorded their precision (read from
// the device property, else fp32); still read.
inline constexpr long long before_precision_version = 6;
// Files before failed points recorded their cause (read as "unknown"); still read.
inline constexpr long long before_failure_cause_version = 5;
// Files before the file status and partial runs (both read as complete); still read.
inline constexpr long long before_status_version = 3;
// Files before the measurement channel (peak RSS in ranks/, no measurements/); still read.
inline constexpr long long before_measurements_version = 2;
// Files with one run at the root, before rank sweeps; still read.
inline constexpr long long single_run_version = 1;

// Root attributes: the file's origin.
inline constexpr const char* schema_version = "schema_version";
inline constexpr const char* run_count = "run_count";
// "complete"; "running" while points are still to come (a file left so was cut off without a
// word); or "interrupted: WHY" (a signal, a stalled rank).
inline constexpr const char* status = "status";
inline constexpr const char* status_complete = "complete";
inline constexpr const char* status_running = "running";
inline constexpr const char* dlscale_version = "dlscale_version";
inline constexpr const char* git_commit = "git_commit";
inline constexpr const char* command_line = "command_line";
inline constexpr const char* start_time_utc = "start_time_utc";
inline constexpr const char* mpi_library_version = "mpi_library_version";
inline constexpr const char* blas = "blas";
inline constexpr const char* cpu_model = "cpu_model";
// Each device property NAME is the attribute "device_NAME"; this string list names them all.
inline constexpr const char* device_properties = "device_properties";
inline constexpr const char* device_property_prefix = "device_";
inline constexpr const char* device_gemm_gflops = "device_gemm_gflops";
// Its measurements before and after the measured iterations; absent in earlier files (read as 0).
inline constexpr const char* device_gemm_gflops_before = "device_gemm_gflops_before";
inline constexpr const char* device_gemm_gflops_after = "device_gemm_gflops_after";
inline constexpr const char* memory_estimate_bytes = "memory_estimate_bytes";

// Run attributes (each /runs/run_NNN group); the origin attributes above repeat there.
inline constexpr const char* runs_group = "runs";
inline constexpr const char* world_size = "world_size";
// Only on a run cut short: why, and how many of its measured iterations it kept.
inline constexpr const char* partial = "partial";
inline constexpr const char* launch_world_size = "launch_world_size";
inline constexpr const char* intra_host_ring_hops = "intra_host_ring_hops";
inline constexpr const char* inter_host_ring_hops = "inter_host_ring_hops";
inline constexpr const char* slurm_job_id = "slurm_job_id";
inline constexpr const char* slurm_job_name = "slurm_job_name";
inline constexpr const char* slurm_node_list = "slurm_node_list";
inline constexpr const char* slurm_tasks_per_node = "slurm_tasks_per_node";
inline constexpr const char* slurm_cpus_per_task = "slurm_cpus_per_task";
inline constexpr const char* slurm_array_task_id = "slurm_array_task_id";
// "yes", "no" or "unknown"; absent in earlier files (read as unknown).
inline constexpr const char* slurm_node_exclusive = "slurm_node_exclusive";
inline constexpr const char* node_count = "node_count";
inline constexpr const char* ranks_per_node = "ranks_per_node";
inline constexpr const char* model = "model";
inline constexpr const char* model_family = "model_family";
inline constexpr const char* model_description = "model_description";
inline constexpr const char* parameter_count = "parameter_count";
inline constexpr const char* training_flops_per_sample = "training_flops_per_sample";
// A language model's tokens per sample; 0 for other models. Absent before schema 10 (read as 0).
inline constexpr const char* tokens_per_sample = "tokens_per_sample";
inline constexpr const char* batch_per_rank = "batch_per_rank";
inline constexpr const char* warmup_iterations = "warmup_iterations";
inline constexpr const char* measured_iterations = "measured_iterations";
inline constexpr const char* threads_per_rank = "threads_per_rank";
inline constexpr const char* comm_backend = "comm_backend";
// "fp32" or "bf16" (--grad-dtype); absent before schema 6 (read as fp32).
inline constexpr const char* gradient_dtype = "gradient_dtype";
inline constexpr const char* device = "device";
// "fp32", "tf32" or "bf16" (--precision): a run attribute and a column of /study, /study_repeats,
// /failed_points and /node_sharing_probes. Absent before schema 7 (see before_precision_version).
inline constexpr const char* precision = "precision";
inline constexpr const char* seed = "seed";
inline constexpr const char* learning_rate = "learning_rate";
inline constexpr const char* momentum = "momentum";
// "sgd" or "adamw", and AdamW's weight decay; absent in files before --optimizer (SGD, 0).
inline constexpr const char* optimizer = "optimizer";
// "none", "optimizer" or "gradients" (--sharding); absent in files before it (none).
inline constexpr const char* sharding = "sharding";
inline constexpr const char* sharding_group = "sharding_group";  // absent before it: all
inline constexpr const char* weight_decay = "weight_decay";
inline constexpr const char* scaling = "scaling";
inline constexpr const char* bucket_mb = "bucket_mb";
inline constexpr const char* overlap = "overlap";

// Raw data.
inline constexpr const char* timings = "timings";  // [iteration, rank, phase] seconds
inline constexpr const char* loss = "loss";        // [iteration, rank]
inline constexpr const char* communication_seconds = "communication_seconds";  // [iteration, rank]
inline constexpr const char* layers_group = "layers";
inline constexpr const char* kind = "kind";                                  // [layer]
inline constexpr const char* parameter_count_per_layer = "parameter_count";  // [layer]
inline constexpr const char* backward_seconds = "backward_seconds";  // [iteration, rank, layer]
inline constexpr const char* buckets_group = "buckets";
inline constexpr const char* first_layer = "first_layer";  // [bucket]
inline constexpr const char* last_layer = "last_layer";    // [bucket]
inline constexpr const char* bytes = "bytes";              // [bucket]
inline constexpr const char* ranks_group = "ranks";
inline constexpr const char* host = "host";                                    // [rank]
inline constexpr const char* parameter_fingerprint = "parameter_fingerprint";  // [rank]
inline constexpr const char* peak_resident_bytes = "peak_resident_bytes";      // [rank]
inline constexpr const char* local_rank = "local_rank";                        // [rank]
// Schema 8: the learning-rate rule, held-out evaluation and the target (run attributes), and the
// evaluations table.
inline constexpr const char* learning_rate_scaling = "learning_rate_scaling";
inline constexpr const char* base_learning_rate = "base_learning_rate";
inline constexpr const char* learning_rate_warmup_steps = "learning_rate_warmup_steps";
inline constexpr const char* evaluate_every = "evaluate_every";
inline constexpr const char* target_metric = "target_metric";  // "accuracy", "loss" or ""
inline constexpr const char* target_value = "target_value";
inline constexpr const char* evaluations_group = "evaluations";
inline constexpr const char* iteration = "iteration";                // [evaluation]
inline constexpr const char* samples = "samples";                    // [evaluation]
inline constexpr const char* training_seconds = "training_seconds";  // [evaluation]
inline constexpr const char* accuracy = "accuracy";                  // [evaluation]

// Measurement channel: /runs/run_NNN/measurements/NAME, one group per measurement.
inline constexpr const char* measurements_group = "measurements";
inline constexpr const char* description = "description";
inline constexpr const char* shape = "shape";
inline constexpr const char* headline = "headline";
inline constexpr const char* shared_by = "shared_by";          // [rank]
inline constexpr const char* absent_reason = "absent_reason";  // [rank]
inline constexpr const char* value = "value";  // per_rank [rank], per_iteration [iteration, rank]
inline constexpr const char* rank = "rank";    // time_series [sample]
inline constexpr const char* seconds = "seconds";  // time_series [sample], on the run clock

// Attributes on datasets.
inline constexpr const char* units = "units";
inline constexpr const char* dimensions = "dimensions";
inline constexpr const char* phases = "phases";
inline constexpr const char* statistics = "statistics";

// Summary group.
inline constexpr const char* summary_group = "summary";
inline constexpr const char* phase_statistics = "phase_statistics";  // [phase, statistic]
inline constexpr const char* gflops_per_rank = "gflops_per_rank";    // [rank]
inline constexpr const char* load_imbalance_seconds = "load_imbalance_seconds";  // [iteration]
inline constexpr const char* throughput_samples_per_second = "throughput_samples_per_second";
inline constexpr const char* communication_fraction = "communication_fraction";
inline constexpr const char* allreduce_bytes = "allreduce_bytes";
inline constexpr const char* allreduce_seconds = "allreduce_seconds";
inline constexpr const char* allreduce_algbw_gbps = "allreduce_algbw_gbps";
inline constexpr const char* allreduce_busbw_gbps = "allreduce_busbw_gbps";
inline constexpr const char* parameters_identical = "parameters_identical";
// Schema 10: the job's tokens per second (NaN for a model without tokens) and the model FLOPs
// utilisation against the GEMM measured on the device (NaN without one).
inline constexpr const char* tokens_per_second = "tokens_per_second";
inline constexpr const char* mfu = "mfu";
// Schema 8: the gradient noise scale (NaN where there is none, and why) and, on a run that
// reached its target, the first evaluation that did.
inline constexpr const char* noise_scale = "noise_scale";
inline constexpr const char* noise_scale_ci_low = "noise_scale_ci_low";
inline constexpr const char* noise_scale_ci_high = "noise_scale_ci_high";
inline constexpr const char* gradient_squared_norm = "gradient_squared_norm";
inline constexpr const char* gradient_trace_covariance = "gradient_trace_covariance";
inline constexpr const char* noise_scale_absent_reason = "noise_scale_absent_reason";
inline constexpr const char* noise_scale_iterations = "noise_scale_iterations";
inline constexpr const char* iterations_to_target = "iterations_to_target";
inline constexpr const char* samples_to_target = "samples_to_target";
inline constexpr const char* seconds_to_target = "seconds_to_target";
// Study group: one entry per run, by device, precision, thread count, rank count and repeat. Its
// columns are named, with their units, in results/study_columns.hpp; ranks, threads and repeat
// name the same columns of the tables below.
inline constexpr const char* study_group = "study";
inline constexpr const char* baseline_ranks = "baseline_ranks";
inline constexpr const char* ranks = "ranks";
inline constexpr const char* threads = "threads";
inline constexpr const char* repeat = "repeat";  // also a run attribute
// A study column NAME_per_sample for each energy measurement, marked with this attribute.
inline constexpr const char* measurement = "measurement";
inline constexpr const char* per_sample_suffix = "_per_sample";

// Mean and spread over repeats: one entry per (threads, ranks).
inline constexpr const char* study_repeats_group = "study_repeats";
inline constexpr const char* repeats = "repeats";
inline constexpr const char* iteration_seconds_mean = "iteration_seconds_mean";
inline constexpr const char* iteration_seconds_std = "iteration_seconds_std";
inline constexpr const char* iteration_seconds_min = "iteration_seconds_min";
inline constexpr const char* iteration_seconds_max = "iteration_seconds_max";
inline constexpr const char* efficiency_mean = "efficiency_mean";
inline constexpr const char* efficiency_std = "efficiency_std";
inline constexpr const char* throughput_samples_per_second_mean =
    "throughput_samples_per_second_mean";

// Sweep points that could not be measured: one entry per point.
inline constexpr const char* failed_points_group = "failed_points";
inline constexpr const char* batch_per_rank_column = "batch_per_rank";
inline constexpr const char* seed_column = "seed";
inline constexpr const char* reason = "reason";
// A failure_cause_name() (results/study_record.hpp); absent before schema 6.
inline constexpr const char* cause = "cause";

// Node-sharing probes on rank counts the sweep did not train: one entry per probe. ranks, threads,
// batch_per_rank and ranks_per_node reuse the names above.
inline constexpr const char* node_sharing_probes_group = "node_sharing_probes";
inline constexpr const char* shared_seconds = "shared_seconds";
inline constexpr const char* alone_seconds = "alone_seconds";
inline constexpr const char* probe_seconds = "probe_seconds";

// ---- `dlscale comm`: a file holding one sweep of collectives (docs/communication.md) ---------
// In a namespace of its own, so these names stay apart from the training-run names above.
namespace comm_file {

// A comm file is laid out by the results schema (docs/results-format.md), 2 or later: the root
// attributes (run_count 0) and /comm, no /runs. /comm holds the launch and the sweep's first
// table (an allreduce in float by default, and in every file before the other collectives); each
// further table is a group /comm/COLLECTIVE/DTYPE laid out as /comm without the launch.
inline constexpr const char* group = "comm";

// /comm attributes: the launch. warmup_iterations, node_count and mpi_library_version reuse the
// names above.
inline constexpr const char* backend = "backend";
inline constexpr const char* ranks = "ranks";
inline constexpr const char* iterations = "iterations";  // measured, per size

// A table's attributes: which collective in which dtype, as --collective and --dtype name them
// (dtype absent before it: float), and its model (absent before the other collectives).
inline constexpr const char* collective = "collective";
inline constexpr const char* dtype = "dtype";
inline constexpr const char* redop = "redop";  // sum, or none for those that only move data
inline constexpr const char* root = "root";    // a broadcast's; -1 for the other collectives
inline constexpr const char* bus_bandwidth_factor = "bus_bandwidth_factor";
inline constexpr const char* latency_steps = "latency_steps";
inline constexpr const char* average_busbw_gbps = "average_busbw_gbps";
// The values of the table that `dlscale predict` models gradient sums with.
inline constexpr const char* allreduce_collective = "allreduce";
// The sharded strategies' collectives, which `dlscale predict` costs them with where swept.
inline constexpr const char* reduce_scatter_collective = "reduce_scatter";
inline constexpr const char* all_gather_collective = "all_gather";
inline constexpr const char* float_dtype = "float";

// A table's fit attributes.
inline constexpr const char* alpha_seconds = "alpha_seconds";
inline constexpr const char* beta_seconds_per_byte = "beta_seconds_per_byte";
inline constexpr const char* fit_line_intercept_seconds = "fit_line_intercept_seconds";
inline constexpr const char* fit_line_seconds_per_byte = "fit_line_seconds_per_byte";
inline constexpr const char* fit_relative_rms_error = "fit_relative_rms_error";
inline constexpr const char* fit_max_relative_error = "fit_max_relative_error";

// A table's datasets, one entry per message size, and the raw times, of the in-place calls.
// /comm/host [rank] reuses `host`.
inline constexpr const char* bytes = "bytes";
inline constexpr const char* count = "count";
inline constexpr const char* seconds_p50 = "seconds_p50";
inline constexpr const char* seconds_p95 = "seconds_p95";
inline constexpr const char* algbw_gbps_p50 = "algbw_gbps_p50";
inline constexpr const char* algbw_gbps_p95 = "algbw_gbps_p95";
inline constexpr const char* busbw_gbps_p50 = "busbw_gbps_p50";
inline constexpr const char* busbw_gbps_p95 = "busbw_gbps_p95";
inline constexpr const char* wrong_elements = "wrong_elements";
inline constexpr const char* seconds = "seconds";  // [size, iteration, rank]
// Optional (absent before the other collectives): more statistics of the same calls, and the
// out-of-place calls' datasets, each named as the in-place one after this prefix
// (out_of_place_seconds_p50, ..., out_of_place_seconds; bytes and count are the in-place ones).
inline constexpr const char* seconds_mean = "seconds_mean";
inline constexpr const char* seconds_min = "seconds_min";
inline constexpr const char* seconds_max = "seconds_max";
inline constexpr const char* out_of_place_prefix = "out_of_place_";

// Optional: absent in files written before them; readers must do without.
// The piecewise alpha-beta fit: /comm attributes for its error over all sizes, and /comm/fit_pieces
// with one entry per piece: min_bytes, max_bytes and the fit's names above as [piece] datasets.
inline constexpr const char* piecewise_fit_relative_rms_error = "piecewise_fit_relative_rms_error";
inline constexpr const char* piecewise_fit_max_relative_error = "piecewise_fit_max_relative_error";
inline constexpr const char* fit_pieces_group = "fit_pieces";
inline constexpr const char* min_bytes = "min_bytes";
inline constexpr const char* max_bytes = "max_bytes";
// /comm/intra_node and /comm/inter_node: the sweep over one kind of link alone, laid out as /comm
// (attributes ranks, communicators and the fit; bytes, seconds_p50, ..., seconds; fit_pieces).
inline constexpr const char* intra_node_group = "intra_node";
inline constexpr const char* inter_node_group = "inter_node";
inline constexpr const char* communicators = "communicators";

}  // namespace comm_file

}  // namespace dlscale::results::schema
