// The comm results file: a full round trip through HDF5 of every table (the first in /comm itself,
// the others below it), both placements and the links, the schema-2 root attributes the rest of
// dlscale relies on, and read_comm's refusals of files that hold no sweep.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/errors.hpp"
#include "results/comm_reader.hpp"
#include "results/comm_writer.hpp"
#include "results/hdf5_io.hpp"
#include "results/schema.hpp"
#include "results/writer.hpp"

namespace dlscale::results {
namespace {

namespace fs = std::filesystem;

class CommFile : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() / ("dlscale_comm_file_test_" + std::to_string(getpid()));
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  static CommRecord sample_record() {
    CommRecord record;
    record.dlscale_version = "0.1.0";
    record.git_commit = "abc123def456";
    record.command_line = "dlscale comm -b 8 -e 16 -n 2";
    record.start_time_utc = "2026-11-22T12:00:00Z";
    record.mpi_library_version = "Open MPI v4.1.4";
    record.backend = "mpi";
    record.ranks = 3;
    record.rank_hosts = {"node-a", "node-a", "node-b"};
    record.node_count = 2;
    record.warmup_iterations = 1;
    record.measured_iterations = 2;
    CommTable table;
    table.collective = "allreduce";
    table.dtype = "float";
    table.bus_bandwidth_factor = 4.0 / 3;
    table.latency_steps = 4;
    table.average_busbw_gbps = 0.0091;
    table.times.sizes = {
        {8, 2, 1e-6, 2e-6, 0.008, 0.004, 0.0107, 0.0053, 0, 1.5e-6, 1e-6, 2e-6},
        {16, 4, 1.5e-6, 3e-6, 0.0107, 0.0053, 0.0142, 0.0071, 7, 2e-6, 1e-6, 3e-6}};
    table.times.out_of_place_sizes = table.times.sizes;
    table.times.out_of_place_sizes[1].seconds_p50 = 1.75e-6;
    for (int i = 0; i < 2 * 2 * 3; ++i) {
      table.times.seconds.push_back(1e-6 * (i + 1));
      table.times.out_of_place_seconds.push_back(1.1e-6 * (i + 1));
    }
    table.times.fit = {5e-7, 6.25e-8, 1.25e-7, 4.6875e-8, 0.12, 0.3};
    record.tables = {table};
    return record;
  }

  // A bf16 reduce-scatter, bytes of 2 per element: the sample's first table, renamed.
  static CommTable reduce_scatter_in_bf16(const CommTable& like) {
    CommTable table = like;
    table.collective = "reduce_scatter";
    table.dtype = "bf16";
    table.redop = "sum";
    table.bus_bandwidth_factor = 2.0 / 3;
    table.latency_steps = 2;
    for (auto* sizes : {&table.times.sizes, &table.times.out_of_place_sizes})
      for (auto& size : *sizes) size.count = size.bytes / 2;
    table.times.seconds.back() = 9e-6;
    return table;
  }

  fs::path directory_;
};

void expect_same_sizes(const std::vector<CommSizeStatistics>& read,
                       const std::vector<CommSizeStatistics>& written) {
  ASSERT_EQ(read.size(), written.size());
  for (std::size_t s = 0; s < read.size(); ++s) {
    const auto& a = read[s];
    const auto& b = written[s];
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.seconds_p50, b.seconds_p50);
    EXPECT_EQ(a.seconds_p95, b.seconds_p95);
    EXPECT_EQ(a.seconds_mean, b.seconds_mean);
    EXPECT_EQ(a.seconds_min, b.seconds_min);
    EXPECT_EQ(a.seconds_max, b.seconds_max);
    EXPECT_EQ(a.algbw_gbps_p50, b.algbw_gbps_p50);
    EXPECT_EQ(a.algbw_gbps_p95, b.algbw_gbps_p95);
    EXPECT_EQ(a.busbw_gbps_p50, b.busbw_gbps_p50);
    EXPECT_EQ(a.busbw_gbps_p95, b.busbw_gbps_p95);
    EXPECT_EQ(a.wrong_elements, b.wrong_elements);
  }
}

void expect_same_table(const CommTable& read, const CommTable& written) {
  EXPECT_EQ(read.collective, written.collective);
  EXPECT_EQ(read.dtype, written.dtype);
  EXPECT_EQ(read.redop, written.redop);
  EXPECT_EQ(read.root, written.root);
  EXPECT_EQ(read.bus_bandwidth_factor, written.bus_bandwidth_factor);
  EXPECT_EQ(read.latency_steps, written.latency_steps);
  EXPECT_EQ(read.average_busbw_gbps, written.average_busbw_gbps);
  EXPECT_EQ(read.times.seconds, written.times.seconds);
  EXPECT_EQ(read.times.out_of_place_seconds, written.times.out_of_place_seconds);
  expect_same_sizes(read.times.sizes, written.times.sizes);
  expect_same_sizes(read.times.out_of_place_sizes, written.times.out_of_place_sizes);
  const auto& a = read.times.fit;
  const auto& b = written.times.fit;
  EXPECT_EQ(a.line_intercept_seconds, b.line_intercept_seconds);
  EXPECT_EQ(a.line_seconds_per_byte, b.line_seconds_per_byte);
  EXPECT_EQ(a.alpha_seconds, b.alpha_seconds);
  EXPECT_EQ(a.beta_seconds_per_byte, b.beta_seconds_per_byte);
  EXPECT_EQ(a.relative_rms_error, b.relative_rms_error);
  EXPECT_EQ(a.max_relative_error, b.max_relative_error);
}

TEST_F(CommFile, RoundTripRestoresEveryField) {
  const CommRecord written = sample_record();
  const fs::path path = directory_ / "comm.h5";
  write_comm(written, path, false);
  const CommRecord read = read_comm(path);
  EXPECT_EQ(read.dlscale_version, written.dlscale_version);
  EXPECT_EQ(read.git_commit, written.git_commit);
  EXPECT_EQ(read.command_line, written.command_line);
  EXPECT_EQ(read.start_time_utc, written.start_time_utc);
  EXPECT_EQ(read.mpi_library_version, written.mpi_library_version);
  EXPECT_EQ(read.backend, written.backend);
  EXPECT_EQ(read.ranks, written.ranks);
  EXPECT_EQ(read.rank_hosts, written.rank_hosts);
  EXPECT_EQ(read.node_count, written.node_count);
  EXPECT_EQ(read.warmup_iterations, written.warmup_iterations);
  EXPECT_EQ(read.measured_iterations, written.measured_iterations);
  ASSERT_EQ(read.tables.size(), 1u);
  expect_same_table(read.tables[0], written.tables[0]);
  EXPECT_EQ(call_seconds(read.tables[0].times.seconds, 2, 3, 1, 1, 2),
            written.tables[0].times.seconds.back());
}

TEST_F(CommFile, EveryTableRoundTripsTheFirstInCommItself) {
  CommRecord written = sample_record();
  const CommTable allreduce = written.tables[0];
  CommTable broadcast = allreduce;
  broadcast.collective = "broadcast";
  broadcast.redop = "none";
  broadcast.root = 0;
  written.tables = {reduce_scatter_in_bf16(allreduce), allreduce, broadcast};
  const fs::path path = directory_ / "tables.h5";
  write_comm(written, path, false);
  {
    const Hdf5Handle file(DLSCALE_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)),
                          H5Fclose);
    const Hdf5Handle comm = hdf5::open_group(file, schema::comm_file::group);
    EXPECT_EQ(hdf5::read_string_attribute(comm, schema::comm_file::collective), "reduce_scatter");
    EXPECT_EQ(hdf5::read_string_attribute(comm, schema::comm_file::dtype), "bf16");
    const Hdf5Handle nested = hdf5::open_group(hdf5::open_group(comm, "allreduce"), "float");
    EXPECT_EQ(hdf5::read_string_attribute(nested, schema::comm_file::collective), "allreduce");
  }
  const CommRecord read = read_comm(path);
  ASSERT_EQ(read.tables.size(), 3u);
  expect_same_table(read.tables[0], written.tables[0]);
  // The nested tables in the file's (alphabetical) order.
  expect_same_table(read.tables[1], written.tables[1]);
  expect_same_table(read.tables[2], written.tables[2]);
  ASSERT_NE(float_allreduce_table(read), nullptr);
  EXPECT_EQ(float_allreduce_table(read)->times.seconds, allreduce.times.seconds);
}

TEST_F(CommFile, ASweepWithoutAFloatAllreduceHasNoneToModelSumsWith) {
  CommRecord written = sample_record();
  written.tables = {reduce_scatter_in_bf16(written.tables[0])};
  const fs::path path = directory_ / "no_allreduce.h5";
  write_comm(written, path, false);
  EXPECT_EQ(float_allreduce_table(read_comm(path)), nullptr);
}

TEST_F(CommFile, PiecewiseFitAndLinkSweepsRoundTrip) {
  CommRecord written = sample_record();
  auto& times = written.tables[0].times;
  const AlphaBetaFit small{4e-7, 1e-9, 1e-7, 7.5e-10, 0.01, 0.02};
  const AlphaBetaFit large{0, 5e-10, 0, 3.75e-10, 0.03, 0.05};
  times.piecewise_fit = {{{8, 8, small}, {16, 16, large}}, 0.02, 0.05};
  LinkSweep inter;
  inter.link = "inter_node";
  inter.ranks = 2;
  inter.communicators = 1;
  inter.times.sizes = times.sizes;
  inter.times.out_of_place_sizes = times.out_of_place_sizes;
  for (int i = 0; i < 2 * 2 * 2; ++i) {
    inter.times.seconds.push_back(2e-6 * (i + 1));
    inter.times.out_of_place_seconds.push_back(3e-6 * (i + 1));
  }
  inter.times.fit = times.fit;
  inter.times.piecewise_fit = {{{8, 16, large}}, 0.03, 0.05};
  written.tables[0].links = {inter};
  const fs::path path = directory_ / "pieces.h5";
  write_comm(written, path, false);
  const CommTable read = read_comm(path).tables.at(0);
  ASSERT_EQ(read.times.piecewise_fit.pieces.size(), 2u);
  EXPECT_EQ(read.times.piecewise_fit.pieces[1].max_bytes, 16);
  EXPECT_EQ(read.times.piecewise_fit.pieces[0].fit.beta_seconds_per_byte,
            small.beta_seconds_per_byte);
  EXPECT_EQ(read.times.piecewise_fit.relative_rms_error, 0.02);
  ASSERT_EQ(read.links.size(), 1u);
  EXPECT_EQ(read.links[0].link, "inter_node");
  EXPECT_EQ(read.links[0].ranks, 2);
  EXPECT_EQ(read.links[0].times.seconds, inter.times.seconds);
  EXPECT_EQ(read.links[0].times.out_of_place_seconds, inter.times.out_of_place_seconds);
  EXPECT_EQ(read.links[0].times.sizes.size(), 2u);
  EXPECT_EQ(read.links[0].times.sizes[1].seconds_p50, inter.times.sizes[1].seconds_p50);
  EXPECT_EQ(read.links[0].times.piecewise_fit.pieces.size(), 1u);
  EXPECT_EQ(read.links[0].times.fit.alpha_seconds, times.fit.alpha_seconds);
}

TEST_F(CommFile, RootSaysSchema2WithNoRuns) {
  const fs::path path = directory_ / "comm.h5";
  write_comm(sample_record(), path, false);
  const Hdf5Handle file(DLSCALE_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)),
                        H5Fclose);
  EXPECT_EQ(hdf5::read_integer_attribute(file, schema::schema_version), schema::version);
  EXPECT_EQ(hdf5::read_integer_attribute(file, schema::run_count), 0);
  const Hdf5Handle group = hdf5::open_group(file, schema::comm_file::group);
  EXPECT_EQ(hdf5::dataset_shape(hdf5::open_dataset(group, schema::comm_file::seconds)),
            (std::vector<hsize_t>{2, 2, 3}));
}

TEST_F(CommFile, ExistingFileIsNotClobberedWithoutOverwrite) {
  const fs::path path = directory_ / "taken.h5";
  std::ofstream(path) << "earlier results";
  EXPECT_THROW(write_comm(sample_record(), path, false), UserError);
  write_comm(sample_record(), path, true);
  EXPECT_EQ(read_comm(path).ranks, 3);
}

TEST_F(CommFile, MissingOrForeignFilesAreRefusedNamingThem) {
  const fs::path missing = directory_ / "missing.h5";
  const fs::path text = directory_ / "notes.txt";
  std::ofstream(text) << "not HDF5";
  for (const fs::path& path : {missing, text}) {
    try {
      read_comm(path);
      ADD_FAILURE() << path << " was read";
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find(path.string()), std::string::npos) << error.what();
    }
  }
}

TEST_F(CommFile, ATrainingRunFileIsNotACommSweep) {
  // A training-run file has no /comm group.
  RunRecord run;
  run.ranks = 1;
  run.iterations = 1;
  run.phase_seconds.assign(phase_count, 0.0);
  run.loss = {1.0};
  run.communication_seconds = {0.0};
  run.environment.rank_hosts = {"host"};
  run.parameter_fingerprints = {1};
  run.local_ranks = {0};
  run.summary.gflops_per_rank = {1.0};
  run.summary.load_imbalance_seconds = {0.0};
  const fs::path path = directory_ / "run.h5";
  ResultsFile file;
  file.runs = {run};
  write_results(file, path, false);
  EXPECT_THROW(read_comm(path), UserError);
}

}  // namespace
}  // namespace dlscale::results
