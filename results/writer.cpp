// HDF5 layout of a run; docs/results-format.md is the reader's description of the same.
#include "results/writer.hpp"

#include <vector>

#include "results/hdf5_io.hpp"
#include "results/output_file.hpp"
#include "results/schema.hpp"

namespace dlscale::results {

namespace {

std::vector<std::string> phase_name_list() {
  return {phase_names.begin(), phase_names.end()};
}

void write_root_attributes(hid_t file, const RunRecord& record) {
  using namespace hdf5;
  const auto& env = record.environment;
  const auto& config = record.configuration;
  write_attribute(file, schema::schema_version, schema::version);
  write_attribute(file, schema::dlscale_version, env.dlscale_version);
  write_attribute(file, schema::git_commit, env.git_commit);
  write_attribute(file, schema::command_line, env.command_line);
  write_attribute(file, schema::start_time_utc, env.start_time_utc);
  write_attribute(file, schema::mpi_library_version, env.mpi_library_version);
  write_attribute(file, schema::blas, env.blas);
  write_attribute(file, schema::cpu_model, env.cpu_model);
  write_attribute(file, schema::world_size, (long long)record.ranks);
  write_attribute(file, schema::node_count, (long long)env.node_count);
  write_attribute(file, schema::ranks_per_node, (long long)env.ranks_per_node);
  write_attribute(file, schema::model, config.model);
  write_attribute(file, schema::model_family, config.model_family);
  write_attribute(file, schema::model_description, config.model_description);
  write_attribute(file, schema::parameter_count, (long long)config.parameter_count);
  write_attribute(file, schema::training_flops_per_sample, config.training_flops_per_sample);
  write_attribute(file, schema::batch_per_rank, (long long)config.batch_per_rank);
  write_attribute(file, schema::warmup_iterations, (long long)config.warmup_iterations);
  write_attribute(file, schema::measured_iterations, (long long)config.measured_iterations);
  write_attribute(file, schema::threads_per_rank, (long long)config.threads_per_rank);
  write_attribute(file, schema::comm_backend, config.comm_backend);
  write_attribute(file, schema::device, config.device);
  write_attribute(file, schema::seed, (long long)config.seed);
  write_attribute(file, schema::learning_rate, config.learning_rate);
  write_attribute(file, schema::momentum, config.momentum);
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

  const Hdf5Handle loss = write_dataset(file, schema::loss, record.loss, {iterations, ranks});
  write_attribute(loss, schema::units, std::string("nats (mean softmax cross-entropy)"));
  write_attribute(loss, schema::dimensions, std::vector<std::string>{"iteration", "rank"});
  write_attribute(loss, schema::warmup_iterations,
                  (long long)record.configuration.warmup_iterations);

  const Hdf5Handle ranks_group = create_group(file, schema::ranks_group);
  write_dataset(ranks_group, schema::host, record.environment.rank_hosts);
  write_dataset(ranks_group, schema::parameter_fingerprint, record.parameter_fingerprints,
                {ranks});
  const Hdf5Handle peak_memory =
      write_dataset(ranks_group, schema::peak_resident_bytes, record.peak_resident_bytes, {ranks});
  write_attribute(peak_memory, schema::units, std::string("bytes"));
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
  write_attribute(group, schema::communication_fraction, summary.communication_fraction);
  write_attribute(group, schema::allreduce_bytes, summary.allreduce_bytes);
  write_attribute(group, schema::allreduce_seconds, summary.allreduce_seconds);
  write_attribute(group, schema::allreduce_algbw_gbps, summary.allreduce_algbw_gbps);
  write_attribute(group, schema::allreduce_busbw_gbps, summary.allreduce_busbw_gbps);
  write_attribute(group, schema::parameters_identical,
                  (long long)(summary.parameters_identical ? 1 : 0));
}

}  // namespace

void write_run(const RunRecord& record, const std::filesystem::path& path, bool overwrite) {
  silence_hdf5_error_printing();
  write_atomically(path, overwrite, [&](const std::filesystem::path& temporary) {
    const Hdf5Handle file(
        DLSCALE_H5_CHECK(H5Fcreate(temporary.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT)),
        H5Fclose);
    write_root_attributes(file, record);
    write_raw_data(file, record);
    write_summary(file, record);
    DLSCALE_H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL));
  });
}

}  // namespace dlscale::results
