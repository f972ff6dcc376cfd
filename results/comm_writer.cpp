// HDF5 layout of a comm file; docs/communication.md is the reader's description of the same.
#include "results/comm_writer.hpp"

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "results/hdf5_io.hpp"
#include "results/output_file.hpp"
#include "results/schema.hpp"
#include "results/writer.hpp"

namespace dlscale::results {

namespace {

namespace names = schema::comm_file;

void write_launch_attributes(hid_t group, const CommRecord& record) {
  using namespace hdf5;
  write_attribute(group, names::backend, record.backend);
  write_attribute(group, names::ranks, (long long)record.ranks);
  write_attribute(group, schema::node_count, (long long)record.node_count);
  write_attribute(group, schema::mpi_library_version, record.mpi_library_version);
  write_attribute(group, names::iterations, (long long)record.measured_iterations);
  write_attribute(group, schema::warmup_iterations, (long long)record.warmup_iterations);
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

// One entry per message size, taken from each CommSizeStatistics by `field`.
template <typename Field>
void write_size_column(hid_t group, const std::string& name,
                       const std::vector<CommSizeStatistics>& sizes, Field field,
                       const char* units) {
  std::vector<decltype(field(sizes.front()))> column;
  for (const auto& size : sizes) column.push_back(field(size));
  const Hdf5Handle dataset =
      hdf5::write_dataset(group, name.c_str(), std::span(std::as_const(column)), {column.size()});
  hdf5::write_attribute(dataset, schema::units, std::string(units));
}

// One placement's statistics and raw seconds, each named with `prefix` ("" in place).
void write_placement(hid_t group, const std::string& prefix,
                     const std::vector<CommSizeStatistics>& sizes,
                     const std::vector<double>& raw_seconds, int iterations, int ranks,
                     const char* element_units) {
  using S = CommSizeStatistics;
  constexpr const char* gbps = "GB/s (10^9 bytes/s)";
  const auto column = [&](const char* name, auto field, const char* units) {
    write_size_column(group, prefix + name, sizes, field, units);
  };
  column(
      names::seconds_p50, [](const S& s) { return s.seconds_p50; }, "seconds");
  column(
      names::seconds_p95, [](const S& s) { return s.seconds_p95; }, "seconds");
  column(
      names::seconds_mean, [](const S& s) { return s.seconds_mean; }, "seconds");
  column(
      names::seconds_min, [](const S& s) { return s.seconds_min; }, "seconds");
  column(
      names::seconds_max, [](const S& s) { return s.seconds_max; }, "seconds");
  column(
      names::algbw_gbps_p50, [](const S& s) { return s.algbw_gbps_p50; }, gbps);
  column(
      names::algbw_gbps_p95, [](const S& s) { return s.algbw_gbps_p95; }, gbps);
  column(
      names::busbw_gbps_p50, [](const S& s) { return s.busbw_gbps_p50; }, gbps);
  column(
      names::busbw_gbps_p95, [](const S& s) { return s.busbw_gbps_p95; }, gbps);
  column(
      names::wrong_elements, [](const S& s) { return s.wrong_elements; }, element_units);

  const Hdf5Handle seconds =
      hdf5::write_dataset(group, (prefix + names::seconds).c_str(), raw_seconds,
                          {sizes.size(), hsize_t(iterations), hsize_t(ranks)});
  hdf5::write_attribute(seconds, schema::units, std::string("seconds"));
  hdf5::write_attribute(seconds, schema::dimensions,
                        std::vector<std::string>{"size", "iteration", "rank"});
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

// A sweep's sizes, both placements' statistics and raw times, and its fits.
void write_times(hid_t group, const SweepTimes& times, int iterations, int ranks,
                 const std::string& dtype) {
  using S = CommSizeStatistics;
  const std::string elements = dtype + " elements";
  write_fit_attributes(group, times.fit);
  write_size_column(
      group, names::bytes, times.sizes, [](const S& s) { return s.bytes; }, "bytes");
  write_size_column(
      group, names::count, times.sizes, [](const S& s) { return s.count; }, elements.c_str());
  write_placement(group, "", times.sizes, times.seconds, iterations, ranks, elements.c_str());
  if (!times.out_of_place_sizes.empty())
    write_placement(group, names::out_of_place_prefix, times.out_of_place_sizes,
                    times.out_of_place_seconds, iterations, ranks, elements.c_str());
  write_piecewise_fit(group, times.piecewise_fit);
}

// A table in `group` (/comm itself, or /comm/COLLECTIVE/DTYPE).
void write_table(hid_t group, const CommTable& table, const CommRecord& record) {
  using namespace hdf5;
  write_attribute(group, names::collective, table.collective);
  write_attribute(group, names::dtype, table.dtype);
  write_attribute(group, names::redop, table.redop);
  write_attribute(group, names::root, (long long)table.root);
  write_attribute(group, names::bus_bandwidth_factor, table.bus_bandwidth_factor);
  write_attribute(group, names::latency_steps, table.latency_steps);
  write_attribute(group, names::average_busbw_gbps, table.average_busbw_gbps);
  write_times(group, table.times, record.measured_iterations, record.ranks, table.dtype);
  for (const auto& link : table.links) {
    const Hdf5Handle link_group = create_group(group, link.link.c_str());
    write_attribute(link_group, names::ranks, (long long)link.ranks);
    write_attribute(link_group, names::communicators, (long long)link.communicators);
    write_times(link_group, link.times, record.measured_iterations, link.ranks, table.dtype);
  }
}

}  // namespace

void write_comm(const CommRecord& record, const std::filesystem::path& path, bool overwrite) {
  const FileOrigin origin{record.dlscale_version, record.git_commit, record.command_line,
                          record.start_time_utc};
  write_results_file(path, overwrite, origin, 0, schema::status_complete, [&](hid_t file) {
    const Hdf5Handle group = hdf5::create_group(file, names::group);
    write_launch_attributes(group, record);
    hdf5::write_dataset(group, schema::host, record.rank_hosts);
    for (std::size_t t = 0; t < record.tables.size(); ++t) {
      const CommTable& table = record.tables[t];
      if (t == 0) {
        write_table(group, table, record);
        continue;
      }
      const char* collective = table.collective.c_str();
      const Hdf5Handle collective_group = hdf5::has_child(group, collective)
                                              ? hdf5::open_group(group, collective)
                                              : hdf5::create_group(group, collective);
      write_table(hdf5::create_group(collective_group, table.dtype.c_str()), table, record);
    }
  });
}

}  // namespace dlscale::results
