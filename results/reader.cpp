// Reads the layout written by writer.cpp.
#include "results/reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "results/hdf5_io.hpp"
#include "results/read_in_child.hpp"
#include "results/schema.hpp"
#include "results/value_bounds.hpp"

namespace dlscale::results {

namespace {

// Bounds that no real run comes near, so a damaged count cannot size an allocation.
constexpr long long most_ranks = 1 << 20;
constexpr long long most_iterations = 10'000'000;
constexpr hsize_t most_layers = 100'000;

// Checks a dataset's shape before it is read, so a damaged file can neither make the reader
// allocate whatever it declares nor leave an entry unread.
void require_shape(hid_t parent, const char* name, const std::vector<hsize_t>& expected) {
  const auto shape = hdf5::dataset_shape(hdf5::open_dataset(parent, name));
  if (shape == expected) return;
  const auto dims = [](const std::vector<hsize_t>& s) {
    return fmt::format("{}", fmt::join(s, " x "));
  };
  damaged(
      fmt::format("dataset '{}' has shape [{}], expected [{}]", name, dims(shape), dims(expected)));
}

// The length of a one-dimensional dataset, at most `largest`.
hsize_t require_length(hid_t parent, const char* name, hsize_t largest) {
  const auto shape = hdf5::dataset_shape(hdf5::open_dataset(parent, name));
  if (shape.size() != 1 || shape[0] > largest)
    damaged(fmt::format("dataset '{}' is not a list of at most {} entries", name, largest));
  return shape[0];
}

// Times of a phase or a part of one: each within [0, bounds::longest_seconds].
void require_durations(const char* name, const std::vector<double>& seconds) {
  for (const double value : seconds)
    if (!(value >= 0 && value <= bounds::longest_seconds))
      damaged(fmt::format("dataset '{}' holds {} s, outside [0, {}]", name, value,
                          bounds::longest_seconds));
}

// A value that the report shows or sums: finite, within [0, bounds::largest_value].
double require_value(const char* name, double value) {
  if (!(value >= 0 && value <= bounds::largest_value))
    damaged(fmt::format("'{}' is {}, outside [0, {}]", name, value, bounds::largest_value));
  return value;
}

// An integer attribute that the records hold as an int: within [least, most].
int read_int_attribute(hid_t object, const char* name, long long least, long long most) {
  const long long value = hdf5::read_integer_attribute(object, name);
  if (value < least || value > most)
    damaged(fmt::format("'{}' is {}, outside [{}, {}]", name, value, least, most));
  return int(value);
}

// Reads the learning-rate rule, evaluation interval and target (schema 8) of a run or of the
// failed points' launch, held to what --lr-scaling, --warmup-steps, --eval-every and the targets
// accept.
void read_convergence_settings(hid_t group, RunConfiguration& config) {
  using namespace hdf5;
  const std::string rule = read_string_attribute(group, schema::learning_rate_scaling);
  const auto scaling = learning_rate_scaling_names.named(rule);
  if (!scaling)
    damaged(fmt::format("'{}' is '{}', not {}", schema::learning_rate_scaling, rule.substr(0, 80),
                        fmt::join(learning_rate_scaling_names.all(), ", ")));
  config.learning_rate_scaling = *scaling;
  config.base_learning_rate = read_double_attribute(group, schema::base_learning_rate);
  require_value(schema::base_learning_rate, config.base_learning_rate);
  config.learning_rate_warmup_steps =
      read_int_attribute(group, schema::learning_rate_warmup_steps, 0, INT32_MAX);
  config.evaluate_every = read_int_attribute(group, schema::evaluate_every, 0, INT32_MAX);
  const std::string metric_name = read_string_attribute(group, schema::target_metric);
  const double target_value = read_double_attribute(group, schema::target_value);
  config.target.reset();
  if (metric_name.empty()) {  // trained for its iterations
    require_value(schema::target_value, target_value);
    return;
  }
  const auto metric = target_metric_names.named(metric_name);
  if (!metric)
    damaged(fmt::format("'{}' is '{}', not {} or empty", schema::target_metric,
                        metric_name.substr(0, 80), fmt::join(target_metric_names.all(), ", ")));
  const double most = *metric == TargetMetric::accuracy ? 1.0 : bounds::largest_target_loss;
  if (!(target_value > 0 && target_value <= most))
    damaged(fmt::format("'{}' is {}, outside (0, {}] for a target {}", schema::target_value,
                        target_value, most, metric_name));
  config.target = Target{*metric, target_value};
}

void read_run_attributes(hid_t file, RunRecord& record, long long version) {
  using namespace hdf5;
  auto& env = record.environment;
  auto& config = record.configuration;
  env.dlscale_version = read_string_attribute(file, schema::dlscale_version);
  env.git_commit = read_string_attribute(file, schema::git_commit);
  env.command_line = read_string_attribute(file, schema::command_line);
  env.start_time_utc = read_string_attribute(file, schema::start_time_utc);
  env.mpi_library_version = read_string_attribute(file, schema::mpi_library_version);
  env.blas = read_string_attribute(file, schema::blas);
  env.cpu_model = read_string_attribute(file, schema::cpu_model);
  // Files written before devices described themselves have neither attribute.
  if (has_attribute(file, schema::device_properties))
    for (const auto& name : read_string_list_attribute(file, schema::device_properties))
      env.device_properties.emplace_back(
          name, read_string_attribute(file, (schema::device_property_prefix + name).c_str()));
  if (has_attribute(file, schema::device_gemm_gflops))
    env.device_gemm_gflops = read_double_attribute(file, schema::device_gemm_gflops);
  if (has_attribute(file, schema::device_gemm_gflops_before)) {  // files before: not measured
    env.device_gemm_gflops_before = read_double_attribute(file, schema::device_gemm_gflops_before);
    env.device_gemm_gflops_after = read_double_attribute(file, schema::device_gemm_gflops_after);
  }
  if (has_attribute(file, schema::memory_estimate_bytes))  // files before it: not estimated
    env.memory_estimate_bytes = read_double_attribute(file, schema::memory_estimate_bytes);
  env.node_count = int(read_integer_attribute(file, schema::node_count));
  env.ranks_per_node = int(read_integer_attribute(file, schema::ranks_per_node));
  const long long world_size = read_integer_attribute(file, schema::world_size);
  if (world_size < 1 || world_size > most_ranks)
    damaged(fmt::format("world_size is {}", world_size));
  record.ranks = int(world_size);
  config.model = read_string_attribute(file, schema::model);
  config.model_family = read_string_attribute(file, schema::model_family);
  config.model_description = read_string_attribute(file, schema::model_description);
  config.parameter_count = std::uint64_t(read_integer_attribute(file, schema::parameter_count));
  config.training_flops_per_sample = read_double_attribute(file, schema::training_flops_per_sample);
  if (has_attribute(file, schema::tokens_per_sample))  // schema 10; before it, no tokens known
    config.tokens_per_sample = read_int_attribute(file, schema::tokens_per_sample, 0, INT32_MAX);
  config.batch_per_rank = int(read_integer_attribute(file, schema::batch_per_rank));
  const long long warmup = read_integer_attribute(file, schema::warmup_iterations);
  const long long measured = read_integer_attribute(file, schema::measured_iterations);
  if (warmup < 0 || measured < 1 || warmup + measured > most_iterations)
    damaged(fmt::format("{} warm-up and {} measured iterations", warmup, measured));
  config.warmup_iterations = int(warmup);
  config.measured_iterations = int(measured);
  config.threads_per_rank = int(read_integer_attribute(file, schema::threads_per_rank));
  if (has_attribute(file, schema::repeat))  // schema 3
    config.repeat = int(read_integer_attribute(file, schema::repeat));
  config.comm_backend = read_string_attribute(file, schema::comm_backend);
  if (has_attribute(file, schema::gradient_dtype))  // schema 6
    config.gradient_dtype = read_string_attribute(file, schema::gradient_dtype);
  config.device = read_string_attribute(file, schema::device);
  if (has_attribute(file, schema::precision)) {  // schema 7
    config.precision = read_string_attribute(file, schema::precision);
  } else {  // before: the device said it in a property, where it said it at all
    for (const auto& [name, value] : env.device_properties)
      if (name == schema::precision) config.precision = value;
  }
  config.seed = std::uint64_t(read_integer_attribute(file, schema::seed));
  config.learning_rate = read_double_attribute(file, schema::learning_rate);
  config.momentum = read_double_attribute(file, schema::momentum);
  if (has_attribute(file, schema::optimizer)) {  // within schema 8: SGD before --optimizer
    const std::string name = read_string_attribute(file, schema::optimizer);
    const auto optimizer = optimizer_names.named(name);
    if (!optimizer)
      damaged(fmt::format("'{}' is '{}', not {}", schema::optimizer, name.substr(0, 80),
                          fmt::join(optimizer_names.all(), " or ")));
    config.optimizer = *optimizer;
    config.weight_decay = read_double_attribute(file, schema::weight_decay);
    require_value(schema::weight_decay, config.weight_decay);
  }
  if (has_attribute(file, schema::sharding)) {  // within schema 8: replicated before --sharding
    const std::string name = read_string_attribute(file, schema::sharding);
    const auto sharding = sharding_names.named(name);
    if (!sharding)
      damaged(fmt::format("'{}' is '{}', not {}", schema::sharding, name.substr(0, 80),
                          fmt::join(sharding_names.all(), " or ")));
    config.sharding = *sharding;
  }
  if (has_attribute(file, schema::sharding_group)) {  // absent before hybrid sharding: all
    const std::string name = read_string_attribute(file, schema::sharding_group);
    const auto group = sharding_group_names.named(name);
    if (!group)
      damaged(fmt::format("'{}' is '{}', not {}", schema::sharding_group, name.substr(0, 80),
                          fmt::join(sharding_group_names.all(), " or ")));
    config.sharding_group = *group;
  }
  if (version == schema::single_run_version) {
    env.launch_world_size = record.ranks;
    return;  // one blocking allreduce of all gradients, before buckets existed
  }
  env.launch_world_size = int(read_integer_attribute(file, schema::launch_world_size));
  if (has_attribute(file, schema::intra_host_ring_hops)) {  // early schema 2: from the hosts
    env.intra_host_ring_hops = int(read_integer_attribute(file, schema::intra_host_ring_hops));
    env.inter_host_ring_hops = int(read_integer_attribute(file, schema::inter_host_ring_hops));
  }
  if (has_attribute(file, schema::slurm_job_id))  // early schema-2 files have no Slurm record
    env.slurm = {read_string_attribute(file, schema::slurm_job_id),
                 read_string_attribute(file, schema::slurm_job_name),
                 read_string_attribute(file, schema::slurm_node_list),
                 read_string_attribute(file, schema::slurm_tasks_per_node),
                 read_string_attribute(file, schema::slurm_cpus_per_task),
                 read_string_attribute(file, schema::slurm_array_task_id)};
  if (has_attribute(file, schema::slurm_node_exclusive))
    env.slurm.node_exclusive = read_string_attribute(file, schema::slurm_node_exclusive);
  config.scaling = read_string_attribute(file, schema::scaling);
  config.bucket_mb = read_double_attribute(file, schema::bucket_mb);
  config.overlap = read_integer_attribute(file, schema::overlap) != 0;
  if (version > schema::before_goodput_version) {
    read_convergence_settings(file, config);
  } else {
    config.base_learning_rate = config.learning_rate;
  }
}

// Files before the measurement channel kept each rank's peak RSS in ranks/.
MeasurementRecord peak_memory_measurement(const std::vector<std::uint64_t>& bytes) {
  MeasurementRecord measurement;
  measurement.name = schema::peak_resident_bytes;
  measurement.units = "bytes";
  measurement.description = "peak resident set size at the end of training (getrusage)";
  measurement.shape = MeasurementShape::per_rank;
  measurement.headline = Headline::none;
  for (const std::uint64_t value : bytes) {
    measurement.values.push_back({double(value)});
    measurement.shared_by.emplace_back();
    measurement.absent_reasons.emplace_back();
  }
  return measurement;
}

// Files without ranks/local_rank: each rank's index among the ranks on its host, which the
// launch placed in rank order.
std::vector<std::uint64_t> local_ranks_from_hosts(const std::vector<std::string>& hosts) {
  std::vector<std::uint64_t> local_ranks;
  for (auto host = hosts.begin(); host != hosts.end(); ++host)
    local_ranks.push_back(std::uint64_t(std::count(hosts.begin(), host, *host)));
  return local_ranks;
}

void read_raw_data(hid_t file, RunRecord& record) {
  using namespace hdf5;
  const auto ranks = hsize_t(record.ranks);
  const auto iterations =
      hsize_t(record.configuration.warmup_iterations + record.configuration.measured_iterations);
  record.iterations = int(iterations);
  require_shape(file, schema::timings, {iterations, ranks, phase_count});
  record.phase_seconds = read_double_dataset(file, schema::timings);
  for (std::size_t k = 0; k < record.phase_seconds.size(); ++k) {
    const double seconds = record.phase_seconds[k];
    // Every phase takes zero or more seconds; a whole step always takes some.
    const bool step = k % phase_count == index_of(Phase::step);
    const double shortest = step ? bounds::shortest_step_seconds : 0;
    if (!(seconds >= shortest && seconds <= bounds::longest_seconds))
      damaged(fmt::format("timings hold a {} of {} s, outside [{}, {}]",
                          phase_names[k % phase_count], seconds, shortest,
                          bounds::longest_seconds));
  }
  require_shape(file, schema::loss, {iterations, ranks});
  record.loss = read_double_dataset(file, schema::loss);
  const Hdf5Handle ranks_group = open_group(file, schema::ranks_group);
  require_shape(ranks_group, schema::host, {ranks});
  record.environment.rank_hosts = read_string_dataset(ranks_group, schema::host);
  if (!has_attribute(file, schema::intra_host_ring_hops)) record.environment.count_ring_hops();
  require_shape(ranks_group, schema::parameter_fingerprint, {ranks});
  record.parameter_fingerprints = read_uint64_dataset(ranks_group, schema::parameter_fingerprint);
  if (has_child(ranks_group, schema::peak_resident_bytes)) {  // schema 1 and 2
    require_shape(ranks_group, schema::peak_resident_bytes, {ranks});
    record.measurements.push_back(
        peak_memory_measurement(read_uint64_dataset(ranks_group, schema::peak_resident_bytes)));
  }
  if (!has_child(file, schema::communication_seconds)) {  // schema 1
    // Sums were blocking then: communication is the allreduce phase. No layers or buckets were
    // recorded.
    record.communication_seconds.resize(std::size_t(iterations * ranks));
    for (hsize_t i = 0; i < iterations * ranks; ++i)
      record.communication_seconds[i] =
          record.phase_seconds[i * phase_count + index_of(Phase::allreduce)];
    record.local_ranks = local_ranks_from_hosts(record.environment.rank_hosts);
    return;
  }

  if (has_child(ranks_group, schema::local_rank)) {  // early schema 2: from the hosts
    require_shape(ranks_group, schema::local_rank, {ranks});
    record.local_ranks = read_uint64_dataset(ranks_group, schema::local_rank);
  } else {
    record.local_ranks = local_ranks_from_hosts(record.environment.rank_hosts);
  }
  require_shape(file, schema::communication_seconds, {iterations, ranks});
  record.communication_seconds = read_double_dataset(file, schema::communication_seconds);
  require_durations(schema::communication_seconds, record.communication_seconds);
  const Hdf5Handle layers_group = open_group(file, schema::layers_group);
  const hsize_t layers = require_length(layers_group, schema::kind, most_layers);
  require_shape(layers_group, schema::parameter_count_per_layer, {layers});
  require_shape(layers_group, schema::backward_seconds, {iterations, ranks, layers});
  const auto kinds = read_string_dataset(layers_group, schema::kind);
  const auto layer_parameters = read_int64_dataset(layers_group, schema::parameter_count_per_layer);
  for (std::size_t i = 0; i < kinds.size(); ++i)
    record.layers.push_back({kinds[i], std::uint64_t(layer_parameters.at(i))});
  record.layer_backward_seconds = read_double_dataset(layers_group, schema::backward_seconds);
  require_durations(schema::backward_seconds, record.layer_backward_seconds);
  const Hdf5Handle buckets_group = open_group(file, schema::buckets_group);
  const hsize_t buckets = require_length(buckets_group, schema::first_layer, layers);
  require_shape(buckets_group, schema::last_layer, {buckets});
  require_shape(buckets_group, schema::bytes, {buckets});
  const auto first = read_int64_dataset(buckets_group, schema::first_layer);
  const auto last = read_int64_dataset(buckets_group, schema::last_layer);
  const auto bytes = read_double_dataset(buckets_group, schema::bytes);
  for (std::size_t b = 0; b < first.size(); ++b) {
    // predict replays the buckets on the layers: each must name layers that exist.
    if (!(first[b] >= 0 && first[b] <= last[b] && hsize_t(last[b]) < layers))
      damaged(fmt::format("bucket {} holds layers {} to {}, not within 0 to {}", b, first[b],
                          last[b], layers - 1));
    if (!(bytes[b] >= 0 && bytes[b] <= bounds::largest_value))
      damaged(fmt::format("bucket {} holds {} bytes", b, bytes[b]));
    record.buckets.push_back({int(first[b]), int(last[b]), bytes[b]});
  }
}

void read_measurements(hid_t file, RunRecord& record) {
  using namespace hdf5;
  if (!has_child(file, schema::measurements_group)) return;  // before schema 3
  const Hdf5Handle group = open_group(file, schema::measurements_group);
  const auto ranks = hsize_t(record.ranks);
  for (const std::string& name : child_names(group)) {
    const Hdf5Handle series = open_group(group, name.c_str());
    MeasurementRecord measurement;
    measurement.name = name;
    measurement.units = read_string_attribute(series, schema::units);
    measurement.description = read_string_attribute(series, schema::description);
    try {
      measurement.shape = shape_from_name(read_string_attribute(series, schema::shape));
      measurement.headline = headline_from_name(read_string_attribute(series, schema::headline));
    } catch (const std::invalid_argument& error) {
      damaged(fmt::format("measurement '{}': {}", name, error.what()));
    }
    require_shape(series, schema::shared_by, {ranks});
    require_shape(series, schema::absent_reason, {ranks});
    switch (measurement.shape) {
      case MeasurementShape::per_rank:
        require_shape(series, schema::value, {ranks});
        break;
      case MeasurementShape::per_iteration:
        require_shape(series, schema::value, {hsize_t(record.iterations), ranks});
        break;
      case MeasurementShape::time_series: {
        // Samples every 10 ms for a day on every rank is far beyond any real run.
        const hsize_t samples = require_length(series, schema::value, ranks * 10'000'000);
        require_shape(series, schema::rank, {samples});
        require_shape(series, schema::seconds, {samples});
        break;
      }
    }
    measurement.shared_by = read_string_dataset(series, schema::shared_by);
    measurement.absent_reasons = read_string_dataset(series, schema::absent_reason);
    const std::vector<double> values = read_double_dataset(series, schema::value);
    // NaN stands for a value a rank could not take; nothing is infinite or beyond the bound.
    for (const double value : values)
      if (std::abs(value) > bounds::largest_value)
        damaged(fmt::format("measurement '{}' holds {}", name, value));
    measurement.values.resize(ranks);
    measurement.seconds.resize(measurement.shape == MeasurementShape::time_series ? ranks : 0);
    const auto measured = [&](std::size_t r) { return measurement.absent_reasons[r].empty(); };
    switch (measurement.shape) {
      case MeasurementShape::per_rank:
        for (std::size_t r = 0; r < ranks; ++r)
          if (measured(r)) measurement.values[r] = {values[r]};
        break;
      case MeasurementShape::per_iteration: {
        const auto iterations = std::size_t(record.iterations);
        for (std::size_t r = 0; r < ranks; ++r)
          if (measured(r))
            for (std::size_t i = 0; i < iterations; ++i)
              measurement.values[r].push_back(values[i * ranks + r]);
        break;
      }
      case MeasurementShape::time_series: {
        const auto sample_ranks = read_int64_dataset(series, schema::rank);
        const auto seconds = read_double_dataset(series, schema::seconds);
        require_durations(schema::seconds, seconds);
        for (std::size_t k = 0; k < values.size(); ++k) {
          if (sample_ranks[k] < 0 || hsize_t(sample_ranks[k]) >= ranks)
            damaged(fmt::format("measurement '{}' names rank {}", name, sample_ranks[k]));
          measurement.seconds[sample_ranks[k]].push_back(seconds[k]);
          measurement.values[sample_ranks[k]].push_back(values[k]);
        }
        break;
      }
    }
    record.measurements.push_back(std::move(measurement));
  }
}

// Tokens per second and MFU (schema 10): NaN where a run has none, else a value the report shows.
// Files before them have what they are derived from: the throughput, the GFLOP/s per rank and the
// yardstick (their tokens per sample unknown, so no tokens per second).
void read_model_rates(hid_t group, RunRecord& record) {
  auto& summary = record.summary;
  if (!hdf5::has_attribute(group, schema::mfu)) {
    summary.tokens_per_second = tokens_per_second(summary.throughput_samples_per_second,
                                                  record.configuration.tokens_per_sample);
    summary.model_flops_utilisation = model_flops_utilisation(
        mean_gflops_per_rank(summary.gflops_per_rank), record.environment.device_gemm_gflops);
    return;
  }
  const auto rate = [&](const char* name) {
    const double value = hdf5::read_double_attribute(group, name);
    return std::isnan(value) ? value : require_value(name, value);
  };
  summary.tokens_per_second = rate(schema::tokens_per_second);
  summary.model_flops_utilisation = rate(schema::mfu);
}

void read_summary(hid_t file, RunRecord& record) {
  using namespace hdf5;
  auto& summary = record.summary;
  const Hdf5Handle group = open_group(file, schema::summary_group);
  require_shape(group, schema::phase_statistics, {phase_count, statistic_names.size()});
  require_shape(group, schema::gflops_per_rank, {hsize_t(record.ranks)});
  require_shape(group, schema::load_imbalance_seconds,
                {hsize_t(record.configuration.measured_iterations)});
  const std::vector<double> table = read_double_dataset(group, schema::phase_statistics);
  for (const double value : table) require_value(schema::phase_statistics, value);
  for (std::size_t p = 0; p < phase_count; ++p) {
    const double* row = table.data() + p * statistic_names.size();
    summary.phase_statistics[p] = {row[0], row[1], row[2], row[3], row[4], row[5]};
  }
  summary.gflops_per_rank = read_double_dataset(group, schema::gflops_per_rank);
  summary.load_imbalance_seconds = read_double_dataset(group, schema::load_imbalance_seconds);
  // The summary attributes the report shows: finite and non-negative, as it requires.
  const auto shown = [&](const char* name) {
    return require_value(name, read_double_attribute(group, name));
  };
  summary.throughput_samples_per_second = shown(schema::throughput_samples_per_second);
  summary.communication_fraction = shown(schema::communication_fraction);
  summary.allreduce_bytes = shown(schema::allreduce_bytes);
  summary.allreduce_seconds = read_double_attribute(group, schema::allreduce_seconds);
  summary.allreduce_algbw_gbps = read_double_attribute(group, schema::allreduce_algbw_gbps);
  summary.allreduce_busbw_gbps = shown(schema::allreduce_busbw_gbps);
  summary.parameters_identical = read_integer_attribute(group, schema::parameters_identical) != 0;
  read_model_rates(group, record);
  if (!has_attribute(group, schema::noise_scale)) {
    summary.noise_scale_absent_reason = "not measured (a file from before schema 8)";
    return;
  }
  // NaN where there is no estimate (or no end to its interval); an estimate may be negative.
  const auto estimate = [&](const char* name) {
    const double value = read_double_attribute(group, name);
    if (std::abs(value) > bounds::largest_value)
      damaged(
          fmt::format("'{}' is {}, beyond {} in magnitude", name, value, bounds::largest_value));
    return value;
  };
  summary.noise_scale = estimate(schema::noise_scale);
  summary.noise_scale_ci_low = estimate(schema::noise_scale_ci_low);
  summary.noise_scale_ci_high = estimate(schema::noise_scale_ci_high);
  summary.gradient_squared_norm = estimate(schema::gradient_squared_norm);
  summary.gradient_trace_covariance = estimate(schema::gradient_trace_covariance);
  summary.noise_scale_absent_reason =
      read_string_attribute(group, schema::noise_scale_absent_reason);
  summary.noise_scale_iterations =
      read_int_attribute(group, schema::noise_scale_iterations, 0, record.iterations);
  if (has_attribute(group, schema::samples_to_target)) {
    const double seconds = read_double_attribute(group, schema::seconds_to_target);
    if (!(seconds >= 0 && seconds <= bounds::longest_seconds))
      damaged(fmt::format("'{}' is {}, outside [0, {}]", schema::seconds_to_target, seconds,
                          bounds::longest_seconds));
    summary.target_reached =
        TargetReached{read_int_attribute(group, schema::iterations_to_target, 1, record.iterations),
                      require_value(schema::samples_to_target,
                                    read_double_attribute(group, schema::samples_to_target)),
                      seconds};
  }
}

// The held-out evaluations table (schema 8), its columns of one length.
void read_evaluations(hid_t file, RunRecord& record) {
  using namespace hdf5;
  if (!has_child(file, schema::evaluations_group)) return;
  const Hdf5Handle group = open_group(file, schema::evaluations_group);
  const hsize_t count = require_length(group, schema::iteration, record.iterations);
  for (const char* column :
       {schema::samples, schema::training_seconds, schema::accuracy, schema::loss})
    require_shape(group, column, {count});
  const auto iterations = read_int64_dataset(group, schema::iteration);
  const auto samples = read_double_dataset(group, schema::samples);
  const auto seconds = read_double_dataset(group, schema::training_seconds);
  const auto accuracy = read_double_dataset(group, schema::accuracy);
  const auto loss = read_double_dataset(group, schema::loss);
  for (hsize_t k = 0; k < count; ++k) {
    if (iterations[k] < 0 || iterations[k] >= record.iterations)
      damaged(fmt::format("evaluation {} is after iteration {} of a run of {}", k, iterations[k],
                          record.iterations));
    // An accuracy is a fraction; a diverged run's loss may be NaN, never infinite or negative.
    const auto outside = [&](const char* column, double value, double most) {
      damaged(fmt::format("{}/{}[{}] is {}, outside [0, {}]", schema::evaluations_group, column, k,
                          value, most));
    };
    if (!(samples[k] >= 0 && samples[k] <= bounds::largest_value))
      outside(schema::samples, samples[k], bounds::largest_value);
    if (!(seconds[k] >= 0 && seconds[k] <= bounds::longest_seconds))
      outside(schema::training_seconds, seconds[k], bounds::longest_seconds);
    if (!(accuracy[k] >= 0 && accuracy[k] <= 1)) outside(schema::accuracy, accuracy[k], 1);
    if (!std::isnan(loss[k]) && !(loss[k] >= 0 && loss[k] <= bounds::largest_value))
      outside(schema::loss, loss[k], bounds::largest_value);
    record.evaluations.push_back(
        {int(iterations[k]), samples[k], seconds[k], accuracy[k], loss[k]});
  }
}

RunRecord read_run(hid_t group, long long version) {
  RunRecord record;
  read_run_attributes(group, record, version);
  if (hdf5::has_attribute(group, schema::partial))  // schema 4
    record.partial_reason = hdf5::read_string_attribute(group, schema::partial);
  read_raw_data(group, record);
  read_measurements(group, record);
  read_evaluations(group, record);
  read_summary(group, record);
  return record;
}

// A table's precision column: one name per row, or fp32 for every row in files before schema 7.
std::vector<std::string> read_precision_column(hid_t group, hsize_t count) {
  if (!hdf5::has_child(group, schema::precision)) return std::vector<std::string>(count, "fp32");
  require_shape(group, schema::precision, {count});
  return hdf5::read_string_dataset(group, schema::precision);
}

// The launch settings written with the failed points (schema 8), where the file has them.
std::optional<RunConfiguration> read_failed_points_configuration(hid_t group) {
  using namespace hdf5;
  if (!has_attribute(group, schema::model)) return std::nullopt;
  RunConfiguration config;
  config.model = read_string_attribute(group, schema::model);
  config.scaling = read_string_attribute(group, schema::scaling);
  config.device = read_string_attribute(group, schema::device);
  config.comm_backend = read_string_attribute(group, schema::comm_backend);
  config.gradient_dtype = read_string_attribute(group, schema::gradient_dtype);
  config.bucket_mb = read_double_attribute(group, schema::bucket_mb);
  config.overlap = read_integer_attribute(group, schema::overlap) != 0;
  read_convergence_settings(group, config);
  return config;
}

std::vector<FailedPoint> read_failed_points(hid_t file,
                                            std::optional<RunConfiguration>& configuration) {
  using namespace hdf5;
  const Hdf5Handle group = open_group(file, schema::failed_points_group);
  configuration = read_failed_points_configuration(group);
  const hsize_t count = require_length(group, schema::ranks, hsize_t(bounds::most_runs));
  for (const char* column : {schema::threads, schema::repeat, schema::batch_per_rank_column,
                             schema::seed_column, schema::reason})
    require_shape(group, column, {count});
  const auto ranks = read_int64_dataset(group, schema::ranks);
  const auto threads = read_int64_dataset(group, schema::threads);
  const auto repeats = read_int64_dataset(group, schema::repeat);
  const auto batches = read_int64_dataset(group, schema::batch_per_rank_column);
  const auto seeds = read_uint64_dataset(group, schema::seed_column);
  const auto reasons = read_string_dataset(group, schema::reason);
  std::vector<FailureCause> causes(count, FailureCause::unknown);
  if (has_child(group, schema::cause)) {  // schema 6
    require_shape(group, schema::cause, {count});
    const auto names = read_string_dataset(group, schema::cause);
    for (std::size_t k = 0; k < count; ++k) {
      const auto cause = failure_cause_names.named(names[k]);
      if (!cause) damaged(fmt::format("failed point {} has cause '{}'", k, names[k]));
      causes[k] = *cause;
    }
  }
  const auto precisions = read_precision_column(group, count);
  std::vector<std::string> shardings(count, sharding_names(Sharding::none));
  if (has_child(group, schema::sharding)) {  // schema 9
    require_shape(group, schema::sharding, {count});
    shardings = read_string_dataset(group, schema::sharding);
    for (std::size_t k = 0; k < count; ++k)
      if (!sharding_names.named(shardings[k]))
        damaged(fmt::format("failed point {} has sharding '{}'", k, shardings[k].substr(0, 80)));
  }
  std::vector<FailedPoint> failed;
  for (std::size_t k = 0; k < count; ++k)
    failed.push_back({int(ranks[k]), precisions[k], int(threads[k]), int(repeats[k]),
                      int(batches[k]), seeds[k], causes[k], reasons[k], shardings[k]});
  return failed;
}

std::vector<NodeSharingProbe> read_node_sharing_probes(hid_t file) {
  using namespace hdf5;
  const Hdf5Handle group = open_group(file, schema::node_sharing_probes_group);
  const hsize_t count = require_length(group, schema::ranks, hsize_t(bounds::most_runs));
  for (const char* column : {schema::threads, schema::batch_per_rank_column, schema::ranks_per_node,
                             schema::shared_seconds, schema::alone_seconds, schema::probe_seconds})
    require_shape(group, column, {count});
  const auto ranks = read_int64_dataset(group, schema::ranks);
  const auto threads = read_int64_dataset(group, schema::threads);
  const auto batches = read_int64_dataset(group, schema::batch_per_rank_column);
  const auto ranks_per_node = read_int64_dataset(group, schema::ranks_per_node);
  const auto shared = read_double_dataset(group, schema::shared_seconds);
  const auto alone = read_double_dataset(group, schema::alone_seconds);
  const auto cost = read_double_dataset(group, schema::probe_seconds);
  const auto precisions = read_precision_column(group, count);
  std::vector<NodeSharingProbe> probes;
  for (std::size_t k = 0; k < count; ++k) {
    // predict divides by these: a damaged entry is refused here, not turned into a NaN there.
    const auto positive = [&](const char* name, double value, double largest) {
      if (!(value > 0 && value <= largest))
        damaged(fmt::format("{}/{}[{}] is {}, not in (0, {}]", schema::node_sharing_probes_group,
                            name, k, value, largest));
    };
    positive(schema::ranks, double(ranks[k]), double(most_ranks));
    positive(schema::threads, double(threads[k]), double(most_ranks));
    positive(schema::batch_per_rank_column, double(batches[k]), double(INT32_MAX));
    positive(schema::ranks_per_node, double(ranks_per_node[k]), double(ranks[k]));
    positive(schema::shared_seconds, shared[k], bounds::longest_seconds);
    positive(schema::alone_seconds, alone[k], bounds::longest_seconds);
    positive(schema::probe_seconds, cost[k], bounds::longest_seconds);
    probes.push_back({int(ranks[k]), precisions[k], int(threads[k]), int(batches[k]),
                      int(ranks_per_node[k]), shared[k], alone[k], cost[k]});
  }
  return probes;
}

// dlscale writes every group and dataset under one name, by a hard link. A soft or external link
// could lead out of the file (to another file, or a device); an object under several names (hard
// links to one group) makes a small file read as thousands of runs or series. Both are refused
// before anything is read, as report/dlscale_results.py refuses them.
void require_one_name_per_object(hid_t file) {
  std::string problem;
  DLSCALE_H5_CHECK(H5Lvisit(
      file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t, const char* name, const H5L_info_t* link, void* found) -> herr_t {
        if (link->type == H5L_TYPE_HARD) return 0;
        *static_cast<std::string*>(found) =
            fmt::format("/{} is a link ({}), which dlscale never writes", name,
                        link->type == H5L_TYPE_SOFT       ? "soft"
                        : link->type == H5L_TYPE_EXTERNAL ? "external"
                                                          : "user-defined");
        return 1;
      },
      &problem));
  if (problem.empty())
    DLSCALE_H5_CHECK(H5Ovisit(
        file, H5_INDEX_NAME, H5_ITER_INC,
        [](hid_t, const char* name, const H5O_info_t* object, void* found) -> herr_t {
          if (object->rc <= 1) return 0;
          *static_cast<std::string*>(found) = fmt::format(
              "/{} has {} names (hard links), where dlscale writes one", name, object->rc);
          return 1;
        },
        &problem));
  if (!problem.empty()) damaged(problem);
}

}  // namespace

void damaged(const std::string& what) { throw UserError("damaged results file: " + what); }

OpenedResultsFile open_results_file(const std::filesystem::path& path) {
  silence_hdf5_error_printing();
  require_regular_file(path);
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw UserError(fmt::format("'{}' is not an HDF5 file", path.string()));
  OpenedResultsFile opened{
      Hdf5Handle(DLSCALE_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)), H5Fclose),
      0};
  if (H5Aexists(opened.file, schema::schema_version) <= 0)
    throw UserError(fmt::format("'{}' is not a dlscale results file", path.string()));
  opened.version = hdf5::read_integer_attribute(opened.file, schema::schema_version);
  if (opened.version < schema::single_run_version || opened.version > schema::version)
    throw UserError(fmt::format("'{}' has results schema version {}; this dlscale reads {} to {}",
                                path.string(), opened.version, schema::single_run_version,
                                schema::version));
  require_one_name_per_object(opened.file);
  return opened;
}

namespace {

ResultsFile read_whole_file(const std::filesystem::path& path);

// Whatever fails while reading a file that opened as a dlscale file is the file's doing.
ResultsFile read_checked(const std::filesystem::path& path) {
  ResultsFile results;
  blame_damage_on_file(path, [&] { results = read_whole_file(path); });
  return results;
}

}  // namespace

ResultsFile read_results(const std::filesystem::path& path) {
  read_in_child(path, [&] { read_checked(path); });
  return read_checked(path);
}

namespace {

ResultsFile read_whole_file(const std::filesystem::path& path) {
  const OpenedResultsFile opened = open_results_file(path);
  const hid_t file = opened.file;
  const long long version = opened.version;
  ResultsFile results;
  auto& origin = results.origin;
  origin.dlscale_version = hdf5::read_string_attribute(file, schema::dlscale_version);
  origin.git_commit = hdf5::read_string_attribute(file, schema::git_commit);
  origin.command_line = hdf5::read_string_attribute(file, schema::command_line);
  origin.start_time_utc = hdf5::read_string_attribute(file, schema::start_time_utc);
  if (hdf5::has_attribute(file, schema::status))  // schema 4
    results.status = hdf5::read_string_attribute(file, schema::status);
  if (version == schema::single_run_version) {
    results.runs.push_back(read_run(file, version));
    return results;
  }
  // A `dlscale comm` sweep shares the root attributes and has no runs: read as a training file it
  // would look like one with nothing in it, and merge would pass over it instead of refusing it.
  if (hdf5::has_child(file, schema::comm_file::group))
    throw UserError(fmt::format(
        "'{}' holds a `dlscale comm` allreduce sweep, not training runs (predict reads it with "
        "--comm)",
        path.string()));
  if (hdf5::has_child(file, schema::failed_points_group))  // schema 3
    results.failed_points = read_failed_points(file, results.failed_points_configuration);
  if (hdf5::has_child(file, schema::node_sharing_probes_group))  // schema 5
    results.node_sharing_probes = read_node_sharing_probes(file);
  const long long run_count = hdf5::read_integer_attribute(file, schema::run_count);
  if (run_count < 0 || run_count > bounds::most_runs)
    damaged(fmt::format("run_count is {}, not within 0 to {}", run_count, bounds::most_runs));
  if (run_count == 0) return results;
  const Hdf5Handle runs = hdf5::open_group(file, schema::runs_group);
  for (long long index = 0; index < run_count; ++index)
    results.runs.push_back(
        read_run(hdf5::open_group(runs, run_group_name(std::size_t(index)).c_str()), version));
  return results;
}

}  // namespace

}  // namespace dlscale::results
