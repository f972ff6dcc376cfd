// Reads the layout written by comm_writer.cpp.
#include "results/comm_reader.hpp"

#include <cmath>

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

void read_group_attributes(hid_t group, CommRecord& record) {
  using namespace hdf5;
  record.backend = read_string_attribute(group, names::backend);
  record.ranks = int(read_integer_attribute(group, names::ranks));
  record.node_count = int(read_integer_attribute(group, schema::node_count));
  record.mpi_library_version = read_string_attribute(group, schema::mpi_library_version);
  record.measured_iterations = int(read_integer_attribute(group, names::iterations));
  record.warmup_iterations = int(read_integer_attribute(group, schema::warmup_iterations));
  record.fit = read_fit_attributes(group);
}

void read_datasets(hid_t group, const std::filesystem::path& path, CommRecord& record) {
  using namespace hdf5;
  const auto bytes = read_uint64_dataset(group, names::bytes);
  const auto count = read_uint64_dataset(group, names::count);
  const auto seconds_p50 = read_double_dataset(group, names::seconds_p50);
  const auto seconds_p95 = read_double_dataset(group, names::seconds_p95);
  const auto algbw_p50 = read_double_dataset(group, names::algbw_gbps_p50);
  const auto algbw_p95 = read_double_dataset(group, names::algbw_gbps_p95);
  const auto busbw_p50 = read_double_dataset(group, names::busbw_gbps_p50);
  const auto busbw_p95 = read_double_dataset(group, names::busbw_gbps_p95);
  const auto wrong = read_uint64_dataset(group, names::wrong_elements);
  record.seconds = read_double_dataset(group, names::seconds);
  record.rank_hosts = read_string_dataset(group, schema::host);
  const std::size_t sizes = bytes.size();
  const bool consistent =
      count.size() == sizes && seconds_p50.size() == sizes && seconds_p95.size() == sizes &&
      algbw_p50.size() == sizes && algbw_p95.size() == sizes && busbw_p50.size() == sizes &&
      busbw_p95.size() == sizes && wrong.size() == sizes &&
      record.seconds.size() == sizes * std::size_t(record.measured_iterations * record.ranks) &&
      record.rank_hosts.size() == std::size_t(record.ranks);
  if (!consistent)
    throw UserError(
        fmt::format("'{}': the /{} datasets disagree in length", path.string(), names::group));
  for (std::size_t s = 0; s < bytes.size(); ++s)
    record.sizes.push_back({bytes[s], count[s], seconds_p50[s], seconds_p95[s], algbw_p50[s],
                            algbw_p95[s], busbw_p50[s], busbw_p95[s], wrong[s]});
  require_sizes_in_bounds(names::group, record.sizes);
}

// The piecewise fit where the file has one (written since it was added); else left empty.
void read_piecewise_fit(hid_t group, const std::filesystem::path& path,
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
                                  names::group, names::fit_pieces_group));
  for (std::size_t k = 0; k < min_bytes.size(); ++k)
    piecewise.pieces.push_back({min_bytes[k],
                                columns[0][k],
                                {columns[1][k], columns[2][k], columns[3][k], columns[4][k],
                                 columns[5][k], columns[6][k]}});
}

// /comm/intra_node and /comm/inter_node, where the sweep made them.
void read_link_sweeps(hid_t group, const std::filesystem::path& path, CommRecord& record) {
  using namespace hdf5;
  for (const char* name : {names::intra_node_group, names::inter_node_group}) {
    if (!has_child(group, name)) continue;
    const Hdf5Handle link_group = open_group(group, name);
    LinkSweep link;
    link.link = name;
    link.ranks = int(read_integer_attribute(link_group, names::ranks));
    link.communicators = int(read_integer_attribute(link_group, names::communicators));
    link.fit = read_fit_attributes(link_group);
    const auto bytes = read_uint64_dataset(link_group, names::bytes);
    const auto count = read_uint64_dataset(link_group, names::count);
    const auto p50 = read_double_dataset(link_group, names::seconds_p50);
    const auto p95 = read_double_dataset(link_group, names::seconds_p95);
    const auto algbw_p50 = read_double_dataset(link_group, names::algbw_gbps_p50);
    const auto algbw_p95 = read_double_dataset(link_group, names::algbw_gbps_p95);
    const auto busbw_p50 = read_double_dataset(link_group, names::busbw_gbps_p50);
    const auto busbw_p95 = read_double_dataset(link_group, names::busbw_gbps_p95);
    const auto wrong = read_uint64_dataset(link_group, names::wrong_elements);
    link.seconds = read_double_dataset(link_group, names::seconds);
    const std::size_t sizes = bytes.size();
    const bool consistent =
        link.ranks >= 1 && count.size() == sizes && p50.size() == sizes && p95.size() == sizes &&
        algbw_p50.size() == sizes && algbw_p95.size() == sizes && busbw_p50.size() == sizes &&
        busbw_p95.size() == sizes && wrong.size() == sizes &&
        link.seconds.size() == sizes * std::size_t(record.measured_iterations) * link.ranks;
    if (!consistent)
      throw UserError(fmt::format("'{}': the /{}/{} datasets disagree in length", path.string(),
                                  names::group, name));
    for (std::size_t s = 0; s < sizes; ++s)
      link.sizes.push_back({bytes[s], count[s], p50[s], p95[s], algbw_p50[s], algbw_p95[s],
                            busbw_p50[s], busbw_p95[s], wrong[s]});
    read_piecewise_fit(link_group, path, link.piecewise_fit);
    const std::string where = fmt::format("{}/{}", names::group, name);
    require_sizes_in_bounds(where, link.sizes);
    require_fit_in_bounds(where, link.fit);
    require_piecewise_in_bounds(where, link.piecewise_fit);
    record.links.push_back(std::move(link));
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
    read_group_attributes(group, record);
    read_datasets(group, path, record);
    read_piecewise_fit(group, path, record.piecewise_fit);
    require_fit_in_bounds(names::group, record.fit);
    require_piecewise_in_bounds(names::group, record.piecewise_fit);
    read_link_sweeps(group, path, record);
  });
  return record;
}

}  // namespace

CommRecord read_comm(const std::filesystem::path& path) {
  read_in_child(path, [&] { read_comm_checked(path); });
  return read_comm_checked(path);
}

}  // namespace dlscale::results
