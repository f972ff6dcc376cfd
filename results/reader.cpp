// Reads the layout written by writer.cpp.
#include "results/reader.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "results/hdf5_io.hpp"
#include "results/schema.hpp"

namespace dlscale::results {

namespace {

void read_root_attributes(hid_t file, RunRecord& record) {
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
  env.node_count = int(read_integer_attribute(file, schema::node_count));
  env.ranks_per_node = int(read_integer_attribute(file, schema::ranks_per_node));
  record.ranks = int(read_integer_attribute(file, schema::world_size));
  config.model = read_string_attribute(file, schema::model);
  config.model_family = read_string_attribute(file, schema::model_family);
  config.model_description = read_string_attribute(file, schema::model_description);
  config.parameter_count = std::uint64_t(read_integer_attribute(file, schema::parameter_count));
  config.training_flops_per_sample = read_double_attribute(file, schema::training_flops_per_sample);
  config.batch_per_rank = int(read_integer_attribute(file, schema::batch_per_rank));
  config.warmup_iterations = int(read_integer_attribute(file, schema::warmup_iterations));
  config.measured_iterations = int(read_integer_attribute(file, schema::measured_iterations));
  config.threads_per_rank = int(read_integer_attribute(file, schema::threads_per_rank));
  config.comm_backend = read_string_attribute(file, schema::comm_backend);
  config.device = read_string_attribute(file, schema::device);
  config.seed = std::uint64_t(read_integer_attribute(file, schema::seed));
  config.learning_rate = read_double_attribute(file, schema::learning_rate);
  config.momentum = read_double_attribute(file, schema::momentum);
}

void read_raw_data(hid_t file, RunRecord& record) {
  using namespace hdf5;
  record.phase_seconds = read_double_dataset(file, schema::timings);
  record.iterations = int(dataset_shape(open_dataset(file, schema::timings)).front());
  record.loss = read_double_dataset(file, schema::loss);
  const Hdf5Handle ranks_group = open_group(file, schema::ranks_group);
  record.environment.rank_hosts = read_string_dataset(ranks_group, schema::host);
  record.parameter_fingerprints = read_uint64_dataset(ranks_group, schema::parameter_fingerprint);
  record.peak_resident_bytes = read_uint64_dataset(ranks_group, schema::peak_resident_bytes);
}

void read_summary(hid_t file, RunRecord& record) {
  using namespace hdf5;
  auto& summary = record.summary;
  const Hdf5Handle group = open_group(file, schema::summary_group);
  const std::vector<double> table = read_double_dataset(group, schema::phase_statistics);
  for (std::size_t p = 0; p < phase_count; ++p) {
    const double* row = table.data() + p * statistic_names.size();
    summary.phase_statistics[p] = {row[0], row[1], row[2], row[3], row[4], row[5]};
  }
  summary.gflops_per_rank = read_double_dataset(group, schema::gflops_per_rank);
  summary.load_imbalance_seconds = read_double_dataset(group, schema::load_imbalance_seconds);
  summary.throughput_samples_per_second =
      read_double_attribute(group, schema::throughput_samples_per_second);
  summary.communication_fraction = read_double_attribute(group, schema::communication_fraction);
  summary.allreduce_bytes = read_double_attribute(group, schema::allreduce_bytes);
  summary.allreduce_seconds = read_double_attribute(group, schema::allreduce_seconds);
  summary.allreduce_algbw_gbps = read_double_attribute(group, schema::allreduce_algbw_gbps);
  summary.allreduce_busbw_gbps = read_double_attribute(group, schema::allreduce_busbw_gbps);
  summary.parameters_identical = read_integer_attribute(group, schema::parameters_identical) != 0;
}

}  // namespace

RunRecord read_run(const std::filesystem::path& path) {
  silence_hdf5_error_printing();
  if (!std::filesystem::exists(path))
    throw UserError(fmt::format("results file '{}' does not exist", path.string()));
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw UserError(fmt::format("'{}' is not an HDF5 file", path.string()));
  const Hdf5Handle file(DLSCALE_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)),
                        H5Fclose);
  if (H5Aexists(file, schema::schema_version) <= 0)
    throw UserError(fmt::format("'{}' is not a dlscale results file", path.string()));
  const long long version = hdf5::read_integer_attribute(file, schema::schema_version);
  if (version != schema::version)
    throw UserError(fmt::format("'{}' has results schema version {}; this dlscale reads {}",
                                path.string(), version, schema::version));
  RunRecord record;
  read_root_attributes(file, record);
  read_raw_data(file, record);
  read_summary(file, record);
  return record;
}

}  // namespace dlscale::results
