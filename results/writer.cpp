// HDF5 layout of a run; docs/results-format.md is the reader's description of the same.
#include "results/writer.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "results/hdf5_io.hpp"
#include "results/output_file.hpp"
#include "results/schema.hpp"
#include "results/study_columns.hpp"

namespace dlscale::results {

namespace {

std::vector<std::string> phase_name_list() { return {phase_names.begin(), phase_names.end()}; }

// The learning-rate rule, evaluation interval and target (schema 8): a run's, and the launch
// settings written with its failed points.
void write_convergence_settings(hid_t group, const RunConfiguration& config) {
  using namespace hdf5;
  write_attribute(group, schema::learning_rate_scaling,
                  std::string(learning_rate_scaling_names(config.learning_rate_scaling)));
  write_attribute(group, schema::base_learning_rate, config.base_learning_rate);
  write_attribute(group, schema::learning_rate_warmup_steps,
                  (long long)config.learning_rate_warmup_steps);
  write_attribute(group, schema::evaluate_every, (long long)config.evaluate_every);
  // No target: an empty metric and a value of 0.
  write_attribute(group, schema::target_metric,
                  std::string(config.target ? config.target->metric_name() : ""));
  write_attribute(group, schema::target_value, config.target ? config.target->value : 0.0);
}

void write_run_attributes(hid_t file, const RunRecord& record) {
  using namespace hdf5;
  const auto& env = record.environment;
  const auto& config = record.configuration;
  write_attribute(file, schema::dlscale_version, env.dlscale_version);
  write_attribute(file, schema::git_commit, env.git_commit);
  write_attribute(file, schema::command_line, env.command_line);
  write_attribute(file, schema::start_time_utc, env.start_time_utc);
  write_attribute(file, schema::mpi_library_version, env.mpi_library_version);
  write_attribute(file, schema::blas, env.blas);
  write_attribute(file, schema::cpu_model, env.cpu_model);
  std::vector<std::string> property_names;
  for (const auto& [name, value] : env.device_properties) {
    write_attribute(file, (schema::device_property_prefix + name).c_str(), value);
    property_names.push_back(name);
  }
  if (!property_names.empty()) write_attribute(file, schema::device_properties, property_names);
  write_attribute(file, schema::device_gemm_gflops, env.device_gemm_gflops);
  write_attribute(file, schema::device_gemm_gflops_before, env.device_gemm_gflops_before);
  write_attribute(file, schema::device_gemm_gflops_after, env.device_gemm_gflops_after);
  write_attribute(file, schema::memory_estimate_bytes, env.memory_estimate_bytes);
  write_attribute(file, schema::world_size, (long long)record.ranks);
  if (!record.partial_reason.empty()) write_attribute(file, schema::partial, record.partial_reason);
  write_attribute(file, schema::launch_world_size, (long long)env.launch_world_size);
  write_attribute(file, schema::intra_host_ring_hops, (long long)env.intra_host_ring_hops);
  write_attribute(file, schema::inter_host_ring_hops, (long long)env.inter_host_ring_hops);
  write_attribute(file, schema::slurm_job_id, env.slurm.job_id);
  write_attribute(file, schema::slurm_job_name, env.slurm.job_name);
  write_attribute(file, schema::slurm_node_list, env.slurm.node_list);
  write_attribute(file, schema::slurm_tasks_per_node, env.slurm.tasks_per_node);
  write_attribute(file, schema::slurm_cpus_per_task, env.slurm.cpus_per_task);
  write_attribute(file, schema::slurm_array_task_id, env.slurm.array_task_id);
  write_attribute(file, schema::slurm_node_exclusive, env.slurm.node_exclusive);
  write_attribute(file, schema::node_count, (long long)env.node_count);
  write_attribute(file, schema::ranks_per_node, (long long)env.ranks_per_node);
  write_attribute(file, schema::model, config.model);
  write_attribute(file, schema::model_family, config.model_family);
  write_attribute(file, schema::model_description, config.model_description);
  write_attribute(file, schema::parameter_count, (long long)config.parameter_count);
  write_attribute(file, schema::training_flops_per_sample, config.training_flops_per_sample);
  write_attribute(file, schema::tokens_per_sample, (long long)config.tokens_per_sample);
  write_attribute(file, schema::batch_per_rank, (long long)config.batch_per_rank);
  write_attribute(file, schema::warmup_iterations, (long long)config.warmup_iterations);
  write_attribute(file, schema::measured_iterations, (long long)config.measured_iterations);
  write_attribute(file, schema::threads_per_rank, (long long)config.threads_per_rank);
  write_attribute(file, schema::repeat, (long long)config.repeat);
  write_attribute(file, schema::comm_backend, config.comm_backend);
  write_attribute(file, schema::gradient_dtype, config.gradient_dtype);
  write_attribute(file, schema::device, config.device);
  write_attribute(file, schema::precision, config.precision);
  write_attribute(file, schema::seed, (long long)config.seed);
  write_attribute(file, schema::learning_rate, config.learning_rate);
  write_attribute(file, schema::optimizer, std::string(optimizer_names(config.optimizer)));
  write_attribute(file, schema::sharding, std::string(sharding_names(config.sharding)));
  write_attribute(file, schema::sharding_group,
                  std::string(sharding_group_names(config.sharding_group)));
  write_attribute(file, schema::momentum, config.momentum);
  write_attribute(file, schema::weight_decay, config.weight_decay);
  write_attribute(file, schema::scaling, config.scaling);
  write_attribute(file, schema::bucket_mb, config.bucket_mb);
  write_attribute(file, schema::overlap, (long long)(config.overlap ? 1 : 0));
  write_convergence_settings(file, config);
}

void write_raw_data(hid_t file, const RunRecord& record) {
  using namespace hdf5;
  const auto iterations = hsize_t(record.iterations);
  const auto ranks = hsize_t(record.ranks);

  const Hdf5Handle timings = write_dataset(file, schema::timings, record.phase_seconds,
                                           {iterations, ranks, hsize_t(phase_count)});
  write_attribute(timings, schema::units, std::string("seconds"));
  write_attribute(timings, schema::dimensions,
                  std::vector<std::string>{"iteration", "rank", "phase"});
  write_attribute(timings, schema::phases, phase_name_list());
  write_attribute(timings, schema::warmup_iterations,
                  (long long)record.configuration.warmup_iterations);

  const Hdf5Handle communication = write_dataset(file, schema::communication_seconds,
                                                 record.communication_seconds, {iterations, ranks});
  write_attribute(communication, schema::units, std::string("seconds"));
  write_attribute(communication, schema::dimensions, std::vector<std::string>{"iteration", "rank"});

  const Hdf5Handle loss = write_dataset(file, schema::loss, record.loss, {iterations, ranks});
  write_attribute(loss, schema::units, std::string("nats (mean softmax cross-entropy)"));
  write_attribute(loss, schema::dimensions, std::vector<std::string>{"iteration", "rank"});
  write_attribute(loss, schema::warmup_iterations,
                  (long long)record.configuration.warmup_iterations);

  const Hdf5Handle ranks_group = create_group(file, schema::ranks_group);
  write_dataset(ranks_group, schema::host, record.environment.rank_hosts);
  write_dataset(ranks_group, schema::parameter_fingerprint, record.parameter_fingerprints, {ranks});
  write_dataset(ranks_group, schema::local_rank, record.local_ranks, {ranks});

  const Hdf5Handle layers_group = create_group(file, schema::layers_group);
  std::vector<std::string> kinds;
  std::vector<std::int64_t> layer_parameters;
  for (const auto& layer : record.layers) {
    kinds.push_back(layer.kind);
    layer_parameters.push_back(std::int64_t(layer.parameter_count));
  }
  write_dataset(layers_group, schema::kind, kinds);
  write_dataset(layers_group, schema::parameter_count_per_layer, layer_parameters,
                {hsize_t(kinds.size())});
  const Hdf5Handle backward =
      write_dataset(layers_group, schema::backward_seconds, record.layer_backward_seconds,
                    {iterations, ranks, hsize_t(kinds.size())});
  write_attribute(backward, schema::units, std::string("seconds"));
  write_attribute(backward, schema::dimensions,
                  std::vector<std::string>{"iteration", "rank", "layer"});

  const Hdf5Handle buckets_group = create_group(file, schema::buckets_group);
  std::vector<std::int64_t> first, last;
  std::vector<double> bytes;
  for (const auto& bucket : record.buckets) {
    first.push_back(bucket.first_layer);
    last.push_back(bucket.last_layer);
    bytes.push_back(bucket.bytes);
  }
  const hsize_t bucket_count = record.buckets.size();
  write_dataset(buckets_group, schema::first_layer, first, {bucket_count});
  write_dataset(buckets_group, schema::last_layer, last, {bucket_count});
  write_attribute(write_dataset(buckets_group, schema::bytes, bytes, {bucket_count}), schema::units,
                  std::string("bytes"));
}

// Every measurement the same way, whatever it is: pandas reads a time series as a long table
// (rank, seconds, value), and NaN stands where a rank could not measure.
void write_measurements(hid_t file, const RunRecord& record) {
  using namespace hdf5;
  const Hdf5Handle group = create_group(file, schema::measurements_group);
  const auto ranks = std::size_t(record.ranks);
  for (const auto& measurement : record.measurements) {
    const Hdf5Handle series = create_group(group, measurement.name.c_str());
    write_attribute(series, schema::units, measurement.units);
    write_attribute(series, schema::description, measurement.description);
    write_attribute(series, schema::shape, std::string(shape_name(measurement.shape)));
    write_attribute(series, schema::headline, std::string(headline_name(measurement.headline)));
    write_dataset(series, schema::shared_by, measurement.shared_by);
    write_dataset(series, schema::absent_reason, measurement.absent_reasons);
    const double absent = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> values;
    switch (measurement.shape) {
      case MeasurementShape::per_rank:
        for (std::size_t r = 0; r < ranks; ++r)
          values.push_back(measurement.values[r].empty() ? absent : measurement.values[r].front());
        write_dataset(series, schema::value, values, {ranks});
        break;
      case MeasurementShape::per_iteration: {
        const auto iterations = std::size_t(record.iterations);
        values.assign(iterations * ranks, absent);
        for (std::size_t r = 0; r < ranks; ++r)
          for (std::size_t i = 0; i < std::min(iterations, measurement.values[r].size()); ++i)
            values[i * ranks + r] = measurement.values[r][i];
        const Hdf5Handle dataset =
            write_dataset(series, schema::value, values, {iterations, ranks});
        write_attribute(dataset, schema::dimensions, std::vector<std::string>{"iteration", "rank"});
        break;
      }
      case MeasurementShape::time_series: {
        std::vector<std::int64_t> sample_ranks;
        std::vector<double> seconds;
        for (std::size_t r = 0; r < ranks; ++r)
          for (std::size_t k = 0; k < measurement.values[r].size(); ++k) {
            sample_ranks.push_back(std::int64_t(r));
            seconds.push_back(measurement.seconds[r].at(k));
            values.push_back(measurement.values[r][k]);
          }
        const hsize_t samples = values.size();
        write_dataset(series, schema::rank, sample_ranks, {samples});
        write_attribute(write_dataset(series, schema::seconds, seconds, {samples}), schema::units,
                        std::string("seconds"));
        write_dataset(series, schema::value, values, {samples});
        break;
      }
    }
  }
}

void write_summary(hid_t file, const RunRecord& record) {
  using namespace hdf5;
  const auto& summary = record.summary;
  const Hdf5Handle group = create_group(file, schema::summary_group);

  std::vector<double> table;
  for (const auto& s : summary.phase_statistics)
    table.insert(table.end(), {s.median, s.mean, s.p5, s.p95, s.min, s.max});
  const Hdf5Handle statistics =
      write_dataset(group, schema::phase_statistics, table,
                    {hsize_t(phase_count), hsize_t(statistic_names.size())});
  write_attribute(statistics, schema::units, std::string("seconds"));
  write_attribute(statistics, schema::dimensions, std::vector<std::string>{"phase", "statistic"});
  write_attribute(statistics, schema::phases, phase_name_list());
  write_attribute(statistics, schema::statistics,
                  std::vector<std::string>(statistic_names.begin(), statistic_names.end()));

  const Hdf5Handle gflops = write_dataset(group, schema::gflops_per_rank, summary.gflops_per_rank,
                                          {summary.gflops_per_rank.size()});
  write_attribute(gflops, schema::units, std::string("GFLOP/s"));
  write_attribute(gflops, schema::dimensions, std::vector<std::string>{"rank"});
  const Hdf5Handle imbalance =
      write_dataset(group, schema::load_imbalance_seconds, summary.load_imbalance_seconds,
                    {summary.load_imbalance_seconds.size()});
  write_attribute(imbalance, schema::units, std::string("seconds"));
  // Entry k is iteration warmup_iterations + k: only measured iterations have a value.
  write_attribute(imbalance, schema::dimensions, std::vector<std::string>{"measured iteration"});

  write_attribute(group, schema::throughput_samples_per_second,
                  summary.throughput_samples_per_second);
  write_attribute(group, schema::tokens_per_second, summary.tokens_per_second);
  write_attribute(group, schema::mfu, summary.model_flops_utilisation);
  write_attribute(group, schema::communication_fraction, summary.communication_fraction);
  write_attribute(group, schema::allreduce_bytes, summary.allreduce_bytes);
  write_attribute(group, schema::allreduce_seconds, summary.allreduce_seconds);
  write_attribute(group, schema::allreduce_algbw_gbps, summary.allreduce_algbw_gbps);
  write_attribute(group, schema::allreduce_busbw_gbps, summary.allreduce_busbw_gbps);
  write_attribute(group, schema::parameters_identical,
                  (long long)(summary.parameters_identical ? 1 : 0));
  write_attribute(group, schema::noise_scale, summary.noise_scale);
  write_attribute(group, schema::noise_scale_ci_low, summary.noise_scale_ci_low);
  write_attribute(group, schema::noise_scale_ci_high, summary.noise_scale_ci_high);
  write_attribute(group, schema::gradient_squared_norm, summary.gradient_squared_norm);
  write_attribute(group, schema::gradient_trace_covariance, summary.gradient_trace_covariance);
  write_attribute(group, schema::noise_scale_absent_reason, summary.noise_scale_absent_reason);
  write_attribute(group, schema::noise_scale_iterations, (long long)summary.noise_scale_iterations);
  if (const auto& target = summary.target_reached) {
    write_attribute(group, schema::iterations_to_target, (long long)target->iterations);
    write_attribute(group, schema::samples_to_target, target->samples);
    write_attribute(group, schema::seconds_to_target, target->training_seconds);
  }
}

// One column of a table: `member` of every row (int members as int64), with its units when it
// has any.
template <typename Row, typename Value>
void write_column(hid_t group, const char* name, const std::vector<Row>& rows, Value Row::*member,
                  const char* units = nullptr) {
  using Stored = std::conditional_t<std::is_same_v<Value, int>, std::int64_t, Value>;
  std::vector<Stored> values;
  for (const auto& row : rows) values.push_back(row.*member);
  if constexpr (std::is_same_v<Value, std::string>) {
    hdf5::write_dataset(group, name, values);
  } else {
    const Hdf5Handle dataset = hdf5::write_dataset(group, name, values, {hsize_t(rows.size())});
    if (units != nullptr) hdf5::write_attribute(dataset, schema::units, std::string(units));
  }
}

// The held-out evaluations, a table of columns (empty without --eval-every).
void write_evaluations(hid_t file, const RunRecord& record) {
  const Hdf5Handle group = hdf5::create_group(file, schema::evaluations_group);
  const auto& rows = record.evaluations;
  write_column(group, schema::iteration, rows, &Evaluation::iteration);
  write_column(group, schema::samples, rows, &Evaluation::samples);
  write_column(group, schema::training_seconds, rows, &Evaluation::training_seconds, "seconds");
  write_column(group, schema::accuracy, rows, &Evaluation::accuracy);
  write_column(group, schema::loss, rows, &Evaluation::loss, "nats");
}

void write_study(hid_t file, const StudySummary& study) {
  using namespace hdf5;
  const Hdf5Handle group = create_group(file, schema::study_group);
  write_attribute(group, schema::scaling, study.scaling);
  write_attribute(group, schema::baseline_ranks, (long long)study.baseline_ranks);
  const auto& points = study.points;
  const hsize_t count = points.size();
  for (const StudyColumn& column : study_columns)
    std::visit([&](auto member) { write_column(group, column.name, points, member, column.units); },
               column.member);
  // One column per energy measurement; NaN for a run that could not measure it.
  std::vector<std::string> energy_names;
  for (const auto& point : points)
    for (const auto& [name, joules] : point.energy_joules_per_sample)
      if (std::find(energy_names.begin(), energy_names.end(), name) == energy_names.end())
        energy_names.push_back(name);
  for (const auto& name : energy_names) {
    std::vector<double> values;
    for (const auto& point : points) {
      values.push_back(std::numeric_limits<double>::quiet_NaN());
      for (const auto& [measured, joules] : point.energy_joules_per_sample)
        if (measured == name) values.back() = joules;
    }
    const Hdf5Handle dataset =
        write_dataset(group, (name + schema::per_sample_suffix).c_str(), values, {count});
    write_attribute(dataset, schema::units, std::string("J/sample"));
    write_attribute(dataset, schema::measurement, name);
  }
}

void write_study_repeats(hid_t file, const StudySummary& study) {
  using namespace hdf5;
  const Hdf5Handle group = create_group(file, schema::study_repeats_group);
  const auto& rows = study.configurations;
  const hsize_t count = rows.size();
  const auto column = [&](const char* name, double RepeatSpread::*member, const char* units) {
    write_column(group, name, rows, member, units);
  };
  std::vector<std::int64_t> threads, ranks, repeats;
  for (const auto& row : rows) {
    threads.push_back(row.threads);
    ranks.push_back(row.ranks);
    repeats.push_back(row.repeats);
  }
  write_column(group, schema::device, rows, &RepeatSpread::device);
  write_column(group, schema::precision, rows, &RepeatSpread::precision);
  write_column(group, schema::sharding, rows, &RepeatSpread::sharding);
  write_dataset(group, schema::threads, threads, {count});
  write_dataset(group, schema::ranks, ranks, {count});
  write_dataset(group, schema::repeats, repeats, {count});
  column(schema::iteration_seconds_mean, &RepeatSpread::iteration_seconds_mean, "seconds");
  column(schema::iteration_seconds_std, &RepeatSpread::iteration_seconds_std, "seconds");
  column(schema::iteration_seconds_min, &RepeatSpread::iteration_seconds_min, "seconds");
  column(schema::iteration_seconds_max, &RepeatSpread::iteration_seconds_max, "seconds");
  column(schema::efficiency_mean, &RepeatSpread::efficiency_mean, nullptr);
  column(schema::efficiency_std, &RepeatSpread::efficiency_std, nullptr);
  column(schema::throughput_samples_per_second_mean,
         &RepeatSpread::throughput_samples_per_second_mean, "samples/s");
}

// The launch settings that define a point besides its row (merge checks them): the run
// attributes of the same names.
void write_failed_points_configuration(hid_t group, const RunConfiguration& config) {
  using namespace hdf5;
  write_attribute(group, schema::model, config.model);
  write_attribute(group, schema::scaling, config.scaling);
  write_attribute(group, schema::device, config.device);
  write_attribute(group, schema::comm_backend, config.comm_backend);
  write_attribute(group, schema::gradient_dtype, config.gradient_dtype);
  write_attribute(group, schema::bucket_mb, config.bucket_mb);
  write_attribute(group, schema::overlap, (long long)(config.overlap ? 1 : 0));
  write_convergence_settings(group, config);
}

void write_failed_points(hid_t file, const std::vector<FailedPoint>& failed,
                         const std::optional<RunConfiguration>& configuration) {
  using namespace hdf5;
  const Hdf5Handle group = create_group(file, schema::failed_points_group);
  if (configuration && !failed.empty()) write_failed_points_configuration(group, *configuration);
  write_column(group, schema::ranks, failed, &FailedPoint::ranks);
  write_column(group, schema::precision, failed, &FailedPoint::precision);
  write_column(group, schema::sharding, failed, &FailedPoint::sharding);
  write_column(group, schema::threads, failed, &FailedPoint::threads);
  write_column(group, schema::repeat, failed, &FailedPoint::repeat);
  write_column(group, schema::batch_per_rank_column, failed, &FailedPoint::batch_per_rank);
  write_column(group, schema::seed_column, failed, &FailedPoint::seed);
  std::vector<std::string> causes;
  std::vector<std::string> reasons;
  for (const auto& point : failed) {
    causes.push_back(failure_cause_name(point.cause));
    reasons.push_back(point.reason);
  }
  write_dataset(group, schema::cause, causes);
  write_dataset(group, schema::reason, reasons);
}

void write_node_sharing_probes(hid_t file, const std::vector<NodeSharingProbe>& probes) {
  using namespace hdf5;
  const Hdf5Handle group = create_group(file, schema::node_sharing_probes_group);
  write_column(group, schema::ranks, probes, &NodeSharingProbe::ranks);
  write_column(group, schema::precision, probes, &NodeSharingProbe::precision);
  write_column(group, schema::threads, probes, &NodeSharingProbe::threads);
  write_column(group, schema::batch_per_rank_column, probes, &NodeSharingProbe::batch_per_rank);
  write_column(group, schema::ranks_per_node, probes, &NodeSharingProbe::ranks_per_node);
  write_column(group, schema::shared_seconds, probes, &NodeSharingProbe::shared_seconds, "seconds");
  write_column(group, schema::alone_seconds, probes, &NodeSharingProbe::alone_seconds, "seconds");
  write_column(group, schema::probe_seconds, probes, &NodeSharingProbe::probe_seconds, "seconds");
}

void write_origin_attributes(hid_t file, const FileOrigin& origin, std::size_t run_count,
                             const std::string& status) {
  using namespace hdf5;
  write_attribute(file, schema::schema_version, schema::version);
  write_attribute(file, schema::status, status);
  write_attribute(file, schema::dlscale_version, origin.dlscale_version);
  write_attribute(file, schema::git_commit, origin.git_commit);
  write_attribute(file, schema::command_line, origin.command_line);
  write_attribute(file, schema::start_time_utc, origin.start_time_utc);
  write_attribute(file, schema::run_count, (long long)run_count);
}

}  // namespace

void write_results_file(const std::filesystem::path& path, bool overwrite, const FileOrigin& origin,
                        std::size_t run_count, const std::string& status,
                        const std::function<void(hid_t file)>& write) {
  silence_hdf5_error_printing();
  // The file is built in memory (HDF5's core driver, no backing store) and its image written out
  // in one checked pass: HDF5 1.10 crashes when closing a file whose writes failed, so a full
  // disk or a file-size limit must never reach it.
  std::string image;
  {
    const Hdf5Handle access(DLSCALE_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
    const std::size_t growth_bytes = std::size_t(1) << 20;
    DLSCALE_H5_CHECK(H5Pset_fapl_core(access, growth_bytes, false));
    const Hdf5Handle file(
        DLSCALE_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access)), H5Fclose);
    write_origin_attributes(file, origin, run_count, status);
    write(file);
    DLSCALE_H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL));
    const ssize_t size = DLSCALE_H5_CHECK(H5Fget_file_image(file, nullptr, 0));
    image.resize(std::size_t(size));
    DLSCALE_H5_CHECK(H5Fget_file_image(file, image.data(), image.size()));
  }
  write_atomically(path, overwrite, image);
}

void write_results(const ResultsFile& results, const std::filesystem::path& path, bool overwrite) {
  write_results_file(
      path, overwrite, results.origin, results.runs.size(), results.status, [&](hid_t file) {
        const Hdf5Handle runs = hdf5::create_group(file, schema::runs_group);
        for (std::size_t index = 0; index < results.runs.size(); ++index) {
          const Hdf5Handle run = hdf5::create_group(runs, run_group_name(index).c_str());
          write_run_attributes(run, results.runs[index]);
          write_raw_data(run, results.runs[index]);
          write_measurements(run, results.runs[index]);
          write_evaluations(run, results.runs[index]);
          write_summary(run, results.runs[index]);
        }
        if (results.study) {
          write_study(file, *results.study);
          write_study_repeats(file, *results.study);
        }
        write_failed_points(file, results.failed_points, results.failed_points_configuration);
        write_node_sharing_probes(file, results.node_sharing_probes);
      });
}

std::string run_group_name(std::size_t index) { return fmt::format("run_{:03}", index); }

}  // namespace dlscale::results
