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

void write_fit_attributes(hid_t group, const AlphaBetaFit& fit);

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
  write_fit_attributes(group, fit);
}

// One entry per message size, taken from each CommSizeStatistics by `field`.
template <typename Field>
void write_size_column(hid_t group, const char* name, const std::vector<CommSizeStatistics>& sizes,
                       Field field, const char* units) {
  std::vector<decltype(field(sizes.front()))> column;
  for (const auto& size : sizes) column.push_back(field(size));
  const Hdf5Handle dataset =
      hdf5::write_dataset(group, name, std::span(std::as_const(column)), {column.size()});
  hdf5::write_attribute(dataset, schema::units, std::string(units));
}

void write_sizes_and_seconds(hid_t group, const std::vector<CommSizeStatistics>& sizes,
                             const std::vector<double>& raw_seconds, int iterations, int ranks) {
  using S = CommSizeStatistics;
  constexpr const char* gbps = "GB/s (10^9 bytes/s)";
  write_size_column(
      group, names::bytes, sizes, [](const S& s) { return s.bytes; }, "bytes");
  write_size_column(
      group, names::count, sizes, [](const S& s) { return s.count; }, "float32 elements");
  write_size_column(
      group, names::seconds_p50, sizes, [](const S& s) { return s.seconds_p50; }, "seconds");
  write_size_column(
      group, names::seconds_p95, sizes, [](const S& s) { return s.seconds_p95; }, "seconds");
  write_size_column(
      group, names::algbw_gbps_p50, sizes, [](const S& s) { return s.algbw_gbps_p50; }, gbps);
  write_size_column(
      group, names::algbw_gbps_p95, sizes, [](const S& s) { return s.algbw_gbps_p95; }, gbps);
  write_size_column(
      group, names::busbw_gbps_p50, sizes, [](const S& s) { return s.busbw_gbps_p50; }, gbps);
  write_size_column(
      group, names::busbw_gbps_p95, sizes, [](const S& s) { return s.busbw_gbps_p95; }, gbps);
  write_size_column(
      group, names::wrong_elements, sizes, [](const S& s) { return s.wrong_elements; },
      "float32 elements");

  const Hdf5Handle seconds = hdf5::write_dataset(
      group, names::seconds, raw_seconds, {sizes.size(), hsize_t(iterations), hsize_t(ranks)});
  hdf5::write_attribute(seconds, schema::units, std::string("seconds"));
  hdf5::write_attribute(seconds, schema::dimensions,
                        std::vector<std::string>{"size", "iteration", "rank"});
}

void write_fit_attributes(hid_t group, const AlphaBetaFit& fit) {
  using namespace hdf5;
  write_attribute(group, names::alpha_seconds, fit.alpha_seconds);
  write_attribute(group, names::beta_seconds_per_byte, fit.beta_seconds_per_byte);
  write_attribute(group, names::fit_line_intercept_seconds, fit.line_intercept_seconds);
  write_attribute(group, names::fit_line_seconds_per_byte, fit.line_seconds_per_byte);
  write_attribute(group, names::fit_relative_rms_error, fit.relative_rms_error);
  write_attribute(group, names::fit_max_relative_error, fit.max_relative_error);
}

// The piecewise fit: its error as attributes of `group`, its pieces as [piece] columns.
void write_piecewise_fit(hid_t group, const PiecewiseAlphaBetaFit& piecewise) {
  hdf5::write_attribute(group, names::piecewise_fit_relative_rms_error,
                        piecewise.relative_rms_error);
  hdf5::write_attribute(group, names::piecewise_fit_max_relative_error,
                        piecewise.max_relative_error);
  if (piecewise.pieces.empty()) return;  // fewer than two sizes: nothing was fitted
  const Hdf5Handle pieces = hdf5::create_group(group, names::fit_pieces_group);
  const auto column = [&](const char* name, const char* units, auto field) {
    std::vector<double> values;
    for (const auto& piece : piecewise.pieces) values.push_back(field(piece));
    const Hdf5Handle dataset =
        hdf5::write_dataset(pieces, name, std::span(std::as_const(values)), {values.size()});
    hdf5::write_attribute(dataset, schema::units, std::string(units));
  };
  using P = AlphaBetaPiece;
  column(names::min_bytes, "bytes", [](const P& p) { return p.min_bytes; });
  column(names::max_bytes, "bytes", [](const P& p) { return p.max_bytes; });
  column(names::fit_line_intercept_seconds, "seconds",
         [](const P& p) { return p.fit.line_intercept_seconds; });
  column(names::fit_line_seconds_per_byte, "seconds/byte",
         [](const P& p) { return p.fit.line_seconds_per_byte; });
  column(names::alpha_seconds, "seconds", [](const P& p) { return p.fit.alpha_seconds; });
  column(names::beta_seconds_per_byte, "seconds/byte",
         [](const P& p) { return p.fit.beta_seconds_per_byte; });
  column(names::fit_relative_rms_error, "1", [](const P& p) { return p.fit.relative_rms_error; });
  column(names::fit_max_relative_error, "1", [](const P& p) { return p.fit.max_relative_error; });
}

void write_datasets(hid_t group, const CommRecord& record) {
  write_sizes_and_seconds(group, record.sizes, record.seconds, record.measured_iterations,
                          record.ranks);
  hdf5::write_dataset(group, schema::host, record.rank_hosts);
  write_piecewise_fit(group, record.piecewise_fit);
  for (const auto& link : record.links) {
    const Hdf5Handle link_group = hdf5::create_group(group, link.link.c_str());
    hdf5::write_attribute(link_group, names::ranks, (long long)link.ranks);
    hdf5::write_attribute(link_group, names::communicators, (long long)link.communicators);
    write_fit_attributes(link_group, link.fit);
    write_sizes_and_seconds(link_group, link.sizes, link.seconds, record.measured_iterations,
                            link.ranks);
    write_piecewise_fit(link_group, link.piecewise_fit);
  }
}

}  // namespace

void write_comm(const CommRecord& record, const std::filesystem::path& path, bool overwrite) {
  const FileOrigin origin{record.dlscale_version, record.git_commit, record.command_line,
                          record.start_time_utc};
  write_results_file(path, overwrite, origin, 0, schema::status_complete, [&](hid_t file) {
    const Hdf5Handle group = hdf5::create_group(file, names::group);
    write_group_attributes(group, record);
    write_datasets(group, record);
  });
}

}  // namespace dlscale::results
