// HDF5 layout of a comm file; docs/communication.md is the reader's description of the same.
#include "results/comm_writer.hpp"

#include <span>
#include <utility>
#include <vector>

#include "results/hdf5_io.hpp"
#include "results/output_file.hpp"
#include "results/schema.hpp"
#include "results/writer.hpp"

namespace dlscale::results {

namespace {

namespace names = schema::comm_file;

void write_group_attributes(hid_t group, const CommRecord& record) {
  using namespace hdf5;
  const auto& fit = record.fit;
  write_attribute(group, names::backend, record.backend);
  write_attribute(group, names::collective, std::string("allreduce"));
  write_attribute(group, names::ranks, (long long)record.ranks);
  write_attribute(group, schema::node_count, (long long)record.node_count);
  write_attribute(group, schema::mpi_library_version, record.mpi_library_version);
  write_attribute(group, names::iterations, (long long)record.measured_iterations);
  write_attribute(group, schema::warmup_iterations, (long long)record.warmup_iterations);
  write_attribute(group, names::alpha_seconds, fit.alpha_seconds);
  write_attribute(group, names::beta_seconds_per_byte, fit.beta_seconds_per_byte);
  write_attribute(group, names::fit_line_intercept_seconds, fit.line_intercept_seconds);
  write_attribute(group, names::fit_line_seconds_per_byte, fit.line_seconds_per_byte);
  write_attribute(group, names::fit_relative_rms_error, fit.relative_rms_error);
  write_attribute(group, names::fit_max_relative_error, fit.max_relative_error);
}

// One entry per message size, taken from each CommSizeStatistics by `field`.
template <typename Field>
void write_size_column(hid_t group, const char* name, const CommRecord& record, Field field,
                       const char* units) {
  std::vector<decltype(field(record.sizes.front()))> column;
  for (const auto& size : record.sizes) column.push_back(field(size));
  const Hdf5Handle dataset =
      hdf5::write_dataset(group, name, std::span(std::as_const(column)), {column.size()});
  hdf5::write_attribute(dataset, schema::units, std::string(units));
}

void write_datasets(hid_t group, const CommRecord& record) {
  using S = CommSizeStatistics;
  constexpr const char* gbps = "GB/s (10^9 bytes/s)";
  write_size_column(group, names::bytes, record, [](const S& s) { return s.bytes; }, "bytes");
  write_size_column(group, names::count, record, [](const S& s) { return s.count; },
                    "float32 elements");
  write_size_column(group, names::seconds_p50, record, [](const S& s) { return s.seconds_p50; },
                    "seconds");
  write_size_column(group, names::seconds_p95, record, [](const S& s) { return s.seconds_p95; },
                    "seconds");
  write_size_column(group, names::algbw_gbps_p50, record,
                    [](const S& s) { return s.algbw_gbps_p50; }, gbps);
  write_size_column(group, names::algbw_gbps_p95, record,
                    [](const S& s) { return s.algbw_gbps_p95; }, gbps);
  write_size_column(group, names::busbw_gbps_p50, record,
                    [](const S& s) { return s.busbw_gbps_p50; }, gbps);
  write_size_column(group, names::busbw_gbps_p95, record,
                    [](const S& s) { return s.busbw_gbps_p95; }, gbps);
  write_size_column(group, names::wrong_elements, record,
                    [](const S& s) { return s.wrong_elements; }, "float32 elements");

  const Hdf5Handle seconds = hdf5::write_dataset(
      group, names::seconds, record.seconds,
      {record.sizes.size(), hsize_t(record.measured_iterations), hsize_t(record.ranks)});
  hdf5::write_attribute(seconds, schema::units, std::string("seconds"));
  hdf5::write_attribute(seconds, schema::dimensions,
                        std::vector<std::string>{"size", "iteration", "rank"});
  hdf5::write_dataset(group, schema::host, record.rank_hosts);
}

}  // namespace

void write_comm(const CommRecord& record, const std::filesystem::path& path, bool overwrite) {
  const FileOrigin origin{record.dlscale_version, record.git_commit, record.command_line,
                          record.start_time_utc};
  write_results_file(path, overwrite, origin, 0, [&](hid_t file) {
    const Hdf5Handle group = hdf5::create_group(file, names::group);
    write_group_attributes(group, record);
    write_datasets(group, record);
  });
}

}  // namespace dlscale::results
