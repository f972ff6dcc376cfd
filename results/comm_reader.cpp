// Reads the layout written by comm_writer.cpp: /comm's launch and first table, then the tables
// below it.
#include "results/comm_reader.hpp"

#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "results/hdf5_io.hpp"
#include "results/read_in_child.hpp"
#include "results/reader.hpp"
#include "results/schema.hpp"
#include "results/value_bounds.hpp"

namespace dlscale::results {

namespace {

namespace names = schema::comm_file;

// The bounds of results/value_bounds.hpp, as report/dlscale_results.py applies them to /comm:
// the sizes at least a byte, their times and bandwidths finite and non-negative; a fitted value
// may be NaN (a fit on one rank), never infinite or beyond the bound.
void require_sizes_in_bounds(const std::string& group,
                             const std::vector<CommSizeStatistics>& sizes) {
  for (const auto& size : sizes) {
    if (size.bytes < 1) damaged(fmt::format("/{} holds a size of 0 bytes", group));
    for (const double value : {size.seconds_p50, size.seconds_p95, size.algbw_gbps_p50,
                               size.busbw_gbps_p50, size.busbw_gbps_p95})
      if (!(value >= 0 && value <= bounds::largest_value))
        damaged(fmt::format("/{} holds {} at {} bytes, outside [0, {}]", group, value, size.bytes,
                            bounds::largest_value));
    if (std::abs(size.algbw_gbps_p95) > bounds::largest_value)
      damaged(fmt::format("/{} holds {} at {} bytes", group, size.algbw_gbps_p95, size.bytes));
  }
}

void require_fit_in_bounds(const std::string& group, const AlphaBetaFit& fit) {
  for (const double value :
       {fit.line_intercept_seconds, fit.line_seconds_per_byte, fit.alpha_seconds,
        fit.beta_seconds_per_byte, fit.relative_rms_error, fit.max_relative_error})
    if (std::abs(value) > bounds::largest_value)
      damaged(fmt::format("/{} holds a fitted value of {}", group, value));
}

void require_piecewise_in_bounds(const std::string& group, const PiecewiseAlphaBetaFit& fit) {
  for (const auto& piece : fit.pieces) {
    require_fit_in_bounds(group, piece.fit);
    if (std::abs(piece.min_bytes) > bounds::largest_value ||
        std::abs(piece.max_bytes) > bounds::largest_value)
      damaged(fmt::format("/{} holds a piece of {} to {} bytes", group, piece.min_bytes,
                          piece.max_bytes));
  }
}

Hdf5Handle open_comm_file(const std::filesystem::path& path) {
  OpenedResultsFile opened = open_results_file(path);
  // The /comm group has the same layout since schema 2.
  if (opened.version < schema::before_measurements_version ||
      H5Lexists(opened.file, names::group, H5P_DEFAULT) <= 0)
    throw UserError(fmt::format("'{}' has no /{} group: it was not written by `dlscale comm`",
                                path.string(), names::group));
  return std::move(opened.file);
}

AlphaBetaFit read_fit_attributes(hid_t group) {
  using namespace hdf5;
  AlphaBetaFit fit;
  fit.alpha_seconds = read_double_attribute(group, names::alpha_seconds);
  fit.beta_seconds_per_byte = read_double_attribute(group, names::beta_seconds_per_byte);
  fit.line_intercept_seconds = read_double_attribute(group, names::fit_line_intercept_seconds);
  fit.line_seconds_per_byte = read_double_attribute(group, names::fit_line_seconds_per_byte);
  fit.relative_rms_error = read_double_attribute(group, names::fit_relative_rms_error);
  fit.max_relative_error = read_double_attribute(group, names::fit_max_relative_error);
  return fit;
}

void read_launch_attributes(hid_t group, CommRecord& record) {
  using namespace hdf5;
  record.backend = read_string_attribute(group, names::backend);
  record.ranks = int(read_integer_attribute(group, names::ranks));
  record.node_count = int(read_integer_attribute(group, schema::node_count));
  record.mpi_library_version = read_string_attribute(group, schema::mpi_library_version);
  record.measured_iterations = int(read_integer_attribute(group, names::iterations));
  record.warmup_iterations = int(read_integer_attribute(group, schema::warmup_iterations));
}

// A double column of `sizes` entries, or NaN for each where the file is older than it.
std::vector<double> read_optional_column(hid_t group, const std::string& name, std::size_t sizes) {
  if (!hdf5::has_child(group, name.c_str()))
    return std::vector<double>(sizes, std::numeric_limits<double>::quiet_NaN());
  return hdf5::read_double_dataset(group, name.c_str());
}

// One placement's statistics (named after `prefix`) of the sizes `bytes` and `count`, and its raw
// seconds; false where the datasets disagree in length.
bool read_placement(hid_t group, const std::string& prefix, const std::vector<std::uint64_t>& bytes,
                    const std::vector<std::uint64_t>& count, std::size_t seconds_per_size,
                    std::vector<CommSizeStatistics>& sizes, std::vector<double>& seconds) {
  using namespace hdf5;
  const auto column = [&](const char* name) {
    return read_double_dataset(group, (prefix + name).c_str());
  };
  const auto optional = [&](const char* name) {
    return read_optional_column(group, prefix + name, bytes.size());
  };
  const std::vector<std::vector<double>> columns = {
      column(names::seconds_p50),    column(names::seconds_p95),    column(names::algbw_gbps_p50),
      column(names::algbw_gbps_p95), column(names::busbw_gbps_p50), column(names::busbw_gbps_p95),
      optional(names::seconds_mean), optional(names::seconds_min),  optional(names::seconds_max)};
  const auto wrong = read_uint64_dataset(group, (prefix + names::wrong_elements).c_str());
  seconds = read_double_dataset(group, (prefix + names::seconds).c_str());
  const std::size_t rows = bytes.size();
  bool consistent =
      count.size() == rows && wrong.size() == rows && seconds.size() == rows * seconds_per_size;
  for (const auto& values : columns) consistent = consistent && values.size() == rows;
  if (!consistent) return false;
  for (std::size_t s = 0; s < rows; ++s)
    sizes.push_back({bytes[s], count[s], columns[0][s], columns[1][s], columns[2][s], columns[3][s],
                     columns[4][s], columns[5][s], wrong[s], columns[6][s], columns[7][s],
                     columns[8][s]});
  return true;
}

// The piecewise fit where the file has one (written since it was added); else left empty.
void read_piecewise_fit(hid_t group, const std::filesystem::path& path, const std::string& where,
                        PiecewiseAlphaBetaFit& piecewise) {
  using namespace hdf5;
  if (!has_attribute(group, names::piecewise_fit_relative_rms_error)) return;
  piecewise.relative_rms_error =
      read_double_attribute(group, names::piecewise_fit_relative_rms_error);
  piecewise.max_relative_error =
      read_double_attribute(group, names::piecewise_fit_max_relative_error);
  if (!has_child(group, names::fit_pieces_group)) return;
  const Hdf5Handle pieces = open_group(group, names::fit_pieces_group);
  const auto min_bytes = read_double_dataset(pieces, names::min_bytes);
  const std::vector<std::vector<double>> columns = {
      read_double_dataset(pieces, names::max_bytes),
      read_double_dataset(pieces, names::fit_line_intercept_seconds),
      read_double_dataset(pieces, names::fit_line_seconds_per_byte),
      read_double_dataset(pieces, names::alpha_seconds),
      read_double_dataset(pieces, names::beta_seconds_per_byte),
      read_double_dataset(pieces, names::fit_relative_rms_error),
      read_double_dataset(pieces, names::fit_max_relative_error)};
  for (const auto& column : columns)
    if (column.size() != min_bytes.size())
      throw UserError(fmt::format("'{}': the /{}/{} datasets disagree in length", path.string(),
                                  where, names::fit_pieces_group));
  for (std::size_t k = 0; k < min_bytes.size(); ++k)
    piecewise.pieces.push_back({min_bytes[k],
                                columns[0][k],
                                {columns[1][k], columns[2][k], columns[3][k], columns[4][k],
                                 columns[5][k], columns[6][k]}});
}

// A sweep's times in `group` (/comm, a table's group or a link's), of `ranks` ranks: both
// placements (out of place where the file has it), the fits, each checked against the bounds.
SweepTimes read_times(hid_t group, const std::filesystem::path& path, const std::string& where,
                      int iterations, int ranks) {
  using namespace hdf5;
  SweepTimes times;
  times.fit = read_fit_attributes(group);
  const auto bytes = read_uint64_dataset(group, names::bytes);
  const auto count = read_uint64_dataset(group, names::count);
  const std::size_t seconds_per_size = std::size_t(iterations) * std::size_t(ranks);
  bool consistent = ranks >= 1 && read_placement(group, "", bytes, count, seconds_per_size,
                                                 times.sizes, times.seconds);
  const std::string out_of_place_seconds = std::string(names::out_of_place_prefix) + names::seconds;
  if (consistent && has_child(group, out_of_place_seconds.c_str()))
    consistent = read_placement(group, names::out_of_place_prefix, bytes, count, seconds_per_size,
                                times.out_of_place_sizes, times.out_of_place_seconds);
  if (!consistent)
    throw UserError(fmt::format("'{}': the /{} datasets disagree in length", path.string(), where));
  read_piecewise_fit(group, path, where, times.piecewise_fit);
  require_sizes_in_bounds(where, times.sizes);
  require_sizes_in_bounds(where, times.out_of_place_sizes);
  require_fit_in_bounds(where, times.fit);
  require_piecewise_in_bounds(where, times.piecewise_fit);
  return times;
}

double optional_double_attribute(hid_t group, const char* name) {
  return hdf5::has_attribute(group, name) ? hdf5::read_double_attribute(group, name)
                                          : std::numeric_limits<double>::quiet_NaN();
}

// The table in `group`, `where` in the file: /comm, or comm/COLLECTIVE/DTYPE.
CommTable read_table(hid_t group, const std::filesystem::path& path, const std::string& where,
                     const CommRecord& record) {
  using namespace hdf5;
  CommTable table;
  table.collective = read_string_attribute(group, names::collective);
  // Files before the other collectives and dtypes: an allreduce in float.
  table.dtype = has_attribute(group, names::dtype) ? read_string_attribute(group, names::dtype)
                                                   : names::float_dtype;
  if (has_attribute(group, names::redop)) table.redop = read_string_attribute(group, names::redop);
  table.root =
      has_attribute(group, names::root) ? int(read_integer_attribute(group, names::root)) : -1;
  table.bus_bandwidth_factor = optional_double_attribute(group, names::bus_bandwidth_factor);
  table.latency_steps = optional_double_attribute(group, names::latency_steps);
  table.average_busbw_gbps = optional_double_attribute(group, names::average_busbw_gbps);
  for (const double value :
       {table.bus_bandwidth_factor, table.latency_steps, table.average_busbw_gbps})
    if (std::abs(value) > bounds::largest_value)
      damaged(fmt::format("/{} holds a value of {}", where, value));
  table.times = read_times(group, path, where, record.measured_iterations, record.ranks);
  // intra_node and inter_node, where the sweep made them.
  for (const char* name : {names::intra_node_group, names::inter_node_group}) {
    if (!has_child(group, name)) continue;
    const Hdf5Handle link_group = open_group(group, name);
    LinkSweep link;
    link.link = name;
    link.ranks = int(read_integer_attribute(link_group, names::ranks));
    link.communicators = int(read_integer_attribute(link_group, names::communicators));
    link.times = read_times(link_group, path, fmt::format("{}/{}", where, name),
                            record.measured_iterations, link.ranks);
    table.links.push_back(std::move(link));
  }
  return table;
}

// The tables below /comm, /comm/COLLECTIVE/DTYPE: the groups of /comm that are not its own
// (fit_pieces, intra_node, inter_node), and their groups.
void read_further_tables(hid_t comm, const std::filesystem::path& path, CommRecord& record) {
  using namespace hdf5;
  for (const std::string& collective : child_names(comm)) {
    if (collective == names::fit_pieces_group || collective == names::intra_node_group ||
        collective == names::inter_node_group || !is_group(comm, collective.c_str()))
      continue;
    const Hdf5Handle collective_group = open_group(comm, collective.c_str());
    for (const std::string& dtype : child_names(collective_group)) {
      const std::string where = fmt::format("{}/{}/{}", names::group, collective, dtype);
      record.tables.push_back(
          read_table(open_group(collective_group, dtype.c_str()), path, where, record));
    }
  }
}

CommRecord read_comm_checked(const std::filesystem::path& path) {
  silence_hdf5_error_printing();
  CommRecord record;
  blame_damage_on_file(path, [&] {
    const Hdf5Handle file = open_comm_file(path);
    record.dlscale_version = hdf5::read_string_attribute(file, schema::dlscale_version);
    record.git_commit = hdf5::read_string_attribute(file, schema::git_commit);
    record.command_line = hdf5::read_string_attribute(file, schema::command_line);
    record.start_time_utc = hdf5::read_string_attribute(file, schema::start_time_utc);
    const Hdf5Handle group = hdf5::open_group(file, names::group);
    read_launch_attributes(group, record);
    record.rank_hosts = hdf5::read_string_dataset(group, schema::host);
    if (record.ranks < 1 || record.rank_hosts.size() != std::size_t(record.ranks))
      throw UserError(
          fmt::format("'{}': the /{} datasets disagree in length", path.string(), names::group));
    record.tables.push_back(read_table(group, path, names::group, record));
    read_further_tables(group, path, record);
  });
  return record;
}

}  // namespace

CommRecord read_comm(const std::filesystem::path& path) {
  read_in_child(path, [&] { read_comm_checked(path); });
  return read_comm_checked(path);
}

}  // namespace dlscale::results
