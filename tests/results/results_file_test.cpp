// The results file: a full round trip through HDF5, the promise never to clobber an existing file
// or leave a half-written one under the final name, and damaged files refused in one line.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "core/errors.hpp"
#include "results/hdf5_io.hpp"
#include "results/output_file.hpp"
#include "results/reader.hpp"
#include "results/writer.hpp"

namespace dlscale::results {
namespace {

namespace fs = std::filesystem;

// Expects the reader to refuse `path` in one line holding `expected`.
void expect_refused(const fs::path& path, const std::string& expected) {
  try {
    read_results(path);
    ADD_FAILURE() << path << " was read without complaint";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
  }
}

class ResultsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() / ("dlscale_results_test_" + std::to_string(getpid()));
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  static results::ResultsFile sample_file(std::vector<RunRecord> runs) {
    results::ResultsFile file;
    file.origin = {"0.1.0", "abc123", "dlscale --model fcn:4,3,2 --ranks 1,2",
                   "2026-11-22T12:00:00Z"};
    file.runs = std::move(runs);
    return file;
  }

  static RunRecord sample_record() {
    RunRecord record;
    record.configuration = {.model = "fcn:4,3,2",
                            .model_family = "FCN",
                            .model_description = "4-3-2, sigmoid",
                            .parameter_count = 23,
                            .training_flops_per_sample = 138.0,
                            .batch_per_rank = 8,
                            .warmup_iterations = 1,
                            .measured_iterations = 2,
                            .threads_per_rank = 2,
                            .repeat = 1,
                            .comm_backend = "mpi",
                            .gradient_dtype = "bf16",
                            .device = "cpu",
                            .precision = "bf16",
                            .seed = 99,
                            .learning_rate = 0.05,
                            .momentum = 0.9,
                            .scaling = "strong",
                            .bucket_mb = 2.5,
                            .overlap = true};
    record.environment = {"0.1.0",
                          "abc123",
                          "dlscale --model fcn:4,3,2",
                          "2026-11-22T12:00:00Z",
                          "Open MPI v4.1.4",
                          "OpenBLAS",
                          "Test CPU",
                          {{"gpu_name", "Test GPU"}, {"cudnn", "9.14.0"}},
                          51234.5,
                          48123.25,
                          51234.5,
                          3.5e8,
                          {"node-a", "node-b"},
                          2,
                          1,
                          4};
    record.ranks = 2;
    record.iterations = 3;
    for (int i = 0; i < 3 * 2 * int(phase_count); ++i) record.phase_seconds.push_back(0.001 * i);
    record.loss = {1.5, 1.4, 1.2, 1.1, 0.9, 0.8};
    record.communication_seconds = {0.01, 0.02, 0.03, 0.04, 0.05, 0.06};
    record.layers = {{"dense", 15}, {"sigmoid", 0}, {"dense", 8}};
    for (int i = 0; i < 3 * 2 * 3; ++i) record.layer_backward_seconds.push_back(1e-4 * i);
    record.buckets = {{2, 2, 32}, {0, 0, 60}};
    record.parameter_fingerprints = {0xfedcba9876543210ULL, 0xfedcba9876543210ULL};
    // One measurement of each shape; rank 1 could not measure the per-rank one.
    record.measurements = {{"peak_resident_bytes",
                            "bytes",
                            "peak RSS",
                            results::MeasurementShape::per_rank,
                            results::Headline::peak,
                            {"", ""},
                            {"", "no getrusage here"},
                            {},
                            {{8589934592.0}, {}}},
                           {"iteration_end_seconds",
                            "seconds",
                            "ends",
                            results::MeasurementShape::per_iteration,
                            results::Headline::none,
                            {"", ""},
                            {"", ""},
                            {},
                            {{0.1, 0.2, 0.3}, {0.15, 0.25, 0.35}}},
                           {"host_cpu_utilisation_percent",
                            "%",
                            "host CPU",
                            results::MeasurementShape::time_series,
                            results::Headline::mean,
                            {"node-a", "node-b"},
                            {"", ""},
                            {{0.0, 0.5}, {0.01}},
                            {{50.0, 75.0}, {99.0}}}};
    record.local_ranks = {0, 0};
    record.environment.inter_host_ring_hops = 2;
    record.environment.slurm = {"4242", "study", "node[1-2]", "1(x2)", "2", "3", "yes"};
    record.summary.phase_statistics[2] = {1, 2, 3, 4, 5, 6};
    record.summary.throughput_samples_per_second = 1234.5;
    record.summary.communication_fraction = 0.25;
    record.summary.allreduce_bytes = 92;
    record.summary.allreduce_seconds = 0.002;
    record.summary.allreduce_algbw_gbps = 0.046;
    record.summary.allreduce_busbw_gbps = 0.046;
    record.summary.gflops_per_rank = {1.5, 1.25};
    record.summary.load_imbalance_seconds = {0.001, 0.002};
    record.summary.parameters_identical = true;
    return record;
  }

  // Writes the sample file, lets `edit` damage its run_000 group (and the file), and expects the
  // reader to refuse it in one line naming the file and holding `expected`.
  void expect_damaged(const std::string& name, const std::function<void(hid_t run)>& edit,
                      const std::string& expected = "") {
    const fs::path path = directory_ / (name + ".h5");
    write_results(sample_file({sample_record()}), path, false);
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t run = H5Gopen2(file, "runs/run_000", H5P_DEFAULT);
    edit(run);
    H5Gclose(run);
    H5Fclose(file);
    try {
      read_results(path);
      ADD_FAILURE() << name << ": read without complaint";
    } catch (const UserError& error) {
      const std::string message = error.what();
      EXPECT_EQ(message.rfind("damaged results file: " + path.string() + ": ", 0), 0u) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << name << ": " << message;
    }
  }

  fs::path directory_;
};

void write_doubles(hid_t parent, const char* name, const std::vector<double>& values) {
  const hid_t dataset = H5Dopen2(parent, name, H5P_DEFAULT);
  H5Dwrite(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(dataset);
}

void write_integers(hid_t parent, const char* name, const std::vector<std::int64_t>& values) {
  const hid_t dataset = H5Dopen2(parent, name, H5P_DEFAULT);
  H5Dwrite(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(dataset);
}

TEST_F(ResultsFile, RoundTripRestoresEveryField) {
  const RunRecord written = sample_record();
  const fs::path path = directory_ / "run.h5";
  RunRecord second = written;
  second.configuration.batch_per_rank = 4;
  second.configuration.optimizer = OptimizerKind::adamw;
  second.configuration.weight_decay = 0.01;
  write_results(sample_file({written, second}), path, false);
  const auto file = read_results(path);
  ASSERT_EQ(file.runs.size(), 2u);
  EXPECT_EQ(file.origin.command_line, "dlscale --model fcn:4,3,2 --ranks 1,2");
  EXPECT_EQ(file.runs[1].configuration.batch_per_rank, 4);
  EXPECT_EQ(file.runs[0].configuration.optimizer, OptimizerKind::sgd);
  EXPECT_EQ(file.runs[0].configuration.weight_decay, 0);
  EXPECT_EQ(file.runs[1].configuration.optimizer, OptimizerKind::adamw);
  EXPECT_EQ(file.runs[1].configuration.weight_decay, 0.01);
  const RunRecord& read = file.runs[0];

  EXPECT_EQ(read.configuration.model, written.configuration.model);
  EXPECT_EQ(read.configuration.model_description, written.configuration.model_description);
  EXPECT_EQ(read.configuration.parameter_count, written.configuration.parameter_count);
  EXPECT_EQ(read.configuration.training_flops_per_sample,
            written.configuration.training_flops_per_sample);
  EXPECT_EQ(read.configuration.batch_per_rank, written.configuration.batch_per_rank);
  EXPECT_EQ(read.configuration.warmup_iterations, written.configuration.warmup_iterations);
  EXPECT_EQ(read.configuration.measured_iterations, written.configuration.measured_iterations);
  EXPECT_EQ(read.configuration.threads_per_rank, written.configuration.threads_per_rank);
  EXPECT_EQ(read.configuration.comm_backend, written.configuration.comm_backend);
  EXPECT_EQ(read.configuration.gradient_dtype, "bf16");
  EXPECT_EQ(read.configuration.precision, "bf16");
  EXPECT_EQ(read.configuration.device, written.configuration.device);
  EXPECT_EQ(read.configuration.seed, written.configuration.seed);
  EXPECT_EQ(read.configuration.learning_rate, written.configuration.learning_rate);
  EXPECT_EQ(read.configuration.momentum, written.configuration.momentum);
  EXPECT_EQ(read.configuration.scaling, "strong");
  EXPECT_EQ(read.configuration.bucket_mb, 2.5);
  EXPECT_TRUE(read.configuration.overlap);
  EXPECT_EQ(read.environment.launch_world_size, 4);
  EXPECT_EQ(read.environment.inter_host_ring_hops, 2);
  EXPECT_EQ(read.environment.intra_host_ring_hops, 0);
  EXPECT_EQ(read.environment.slurm.node_list, "node[1-2]");
  EXPECT_EQ(read.environment.slurm.array_task_id, "3");
  EXPECT_EQ(read.environment.slurm.node_exclusive, "yes");
  EXPECT_EQ(read.local_ranks, written.local_ranks);
  EXPECT_EQ(read.communication_seconds, written.communication_seconds);
  ASSERT_EQ(read.layers.size(), 3u);
  EXPECT_EQ(read.layers[1].kind, "sigmoid");
  EXPECT_EQ(read.layers[2].parameter_count, 8u);
  EXPECT_EQ(read.layer_backward_seconds, written.layer_backward_seconds);
  ASSERT_EQ(read.buckets.size(), 2u);
  EXPECT_EQ(read.buckets[1].first_layer, 0);
  EXPECT_EQ(read.buckets[1].bytes, 60);
  EXPECT_EQ(read.environment.git_commit, written.environment.git_commit);
  EXPECT_EQ(read.environment.command_line, written.environment.command_line);
  EXPECT_EQ(read.environment.start_time_utc, written.environment.start_time_utc);
  EXPECT_EQ(read.environment.mpi_library_version, written.environment.mpi_library_version);
  EXPECT_EQ(read.environment.cpu_model, written.environment.cpu_model);
  EXPECT_EQ(read.environment.device_properties, written.environment.device_properties);
  EXPECT_EQ(read.environment.device_gemm_gflops, written.environment.device_gemm_gflops);
  EXPECT_EQ(read.environment.device_gemm_gflops_before, 48123.25);
  EXPECT_EQ(read.environment.device_gemm_gflops_after, 51234.5);
  EXPECT_EQ(read.environment.memory_estimate_bytes, 3.5e8);
  EXPECT_EQ(read.environment.rank_hosts, written.environment.rank_hosts);
  EXPECT_EQ(read.environment.node_count, 2);
  EXPECT_EQ(read.environment.ranks_per_node, 1);
  EXPECT_EQ(read.ranks, 2);
  EXPECT_EQ(read.iterations, 3);
  EXPECT_EQ(read.phase_seconds, written.phase_seconds);
  EXPECT_EQ(read.loss, written.loss);
  EXPECT_EQ(read.parameter_fingerprints, written.parameter_fingerprints);
  ASSERT_EQ(read.measurements.size(), written.measurements.size());
  for (const auto& expected : written.measurements) {
    const auto found = std::find_if(read.measurements.begin(), read.measurements.end(),
                                    [&](const auto& m) { return m.name == expected.name; });
    ASSERT_NE(found, read.measurements.end()) << expected.name << " was not read back";
    EXPECT_EQ(found->units, expected.units) << expected.name;
    EXPECT_EQ(found->shape, expected.shape) << expected.name;
    EXPECT_EQ(found->headline, expected.headline) << expected.name;
    EXPECT_EQ(found->shared_by, expected.shared_by) << expected.name;
    EXPECT_EQ(found->absent_reasons, expected.absent_reasons) << expected.name;
    EXPECT_EQ(found->seconds, expected.seconds) << expected.name;
    EXPECT_EQ(found->values, expected.values) << expected.name;
  }
  EXPECT_EQ(read.configuration.repeat, 1);
  EXPECT_EQ(read.summary.phase_statistics[2].p95, 4);
  EXPECT_EQ(read.summary.throughput_samples_per_second, 1234.5);
  EXPECT_EQ(read.summary.communication_fraction, 0.25);
  EXPECT_EQ(read.summary.allreduce_busbw_gbps, 0.046);
  EXPECT_EQ(read.summary.gflops_per_rank, written.summary.gflops_per_rank);
  EXPECT_EQ(read.summary.load_imbalance_seconds, written.summary.load_imbalance_seconds);
  EXPECT_TRUE(read.summary.parameters_identical);
}

TEST_F(ResultsFile, FailedPointsAreKeptWithTheirCausesAndReasons) {
  const fs::path path = directory_ / "failed.h5";
  auto file = sample_file({sample_record()});
  file.failed_points = {
      {4, "bf16", 2, 1, 64, 43, FailureCause::does_not_fit,
       "out of memory (estimate 9.0 GiB > 8.0 GiB available)"},
      {2, "fp32", 1, 0, 64, 42, FailureCause::diverged, "diverged at iteration 3 (loss nan)"}};
  write_results(file, path, false);
  const auto read = read_results(path);
  ASSERT_EQ(read.failed_points.size(), 2u);
  EXPECT_EQ(read.failed_points[0].ranks, 4);
  EXPECT_EQ(read.failed_points[0].threads, 2);
  EXPECT_EQ(read.failed_points[0].precision, "bf16");
  EXPECT_EQ(read.failed_points[1].precision, "fp32");
  EXPECT_EQ(read.failed_points[0].repeat, 1);
  EXPECT_EQ(read.failed_points[0].seed, 43u);
  EXPECT_EQ(read.failed_points[0].cause, FailureCause::does_not_fit);
  EXPECT_EQ(read.failed_points[1].cause, FailureCause::diverged);
  EXPECT_EQ(read.failed_points[1].reason, "diverged at iteration 3 (loss nan)");
  EXPECT_FALSE(read.failed_points_configuration) << "none was written, none is read";

  // A cause this reader does not know is a damaged file, not a silent "unknown".
  const hid_t h5 = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t group = H5Gopen2(h5, "failed_points", H5P_DEFAULT);
  H5Ldelete(group, "cause", H5P_DEFAULT);
  results::hdf5::write_dataset(group, "cause", std::vector<std::string>{"melted", "diverged"});
  H5Gclose(group);
  H5Fclose(h5);
  expect_refused(path, "failed point 0 has cause 'melted'");
}

TEST_F(ResultsFile, FailedPointsKeepTheLaunchSettingsMergeChecks) {
  const fs::path path = directory_ / "failed-settings.h5";
  auto file = sample_file({});
  file.failed_points = {{2, "fp32", 1, 0, 64, 42, FailureCause::target_not_reached, "short"}};
  RunConfiguration settings = sample_record().configuration;
  settings.model = "lstm-32";
  settings.gradient_dtype = "bf16";
  settings.learning_rate_scaling = results::LearningRateScaling::sqrt;
  settings.target = results::Target{results::TargetMetric::accuracy, 0.8};
  settings.evaluate_every = 20;
  file.failed_points_configuration = settings;
  write_results(file, path, false);
  const auto read = read_results(path);
  ASSERT_TRUE(read.failed_points_configuration);
  EXPECT_EQ(read.failed_points_configuration->model, "lstm-32");
  EXPECT_EQ(read.failed_points_configuration->gradient_dtype, "bf16");
  EXPECT_EQ(read.failed_points_configuration->learning_rate_scaling,
            results::LearningRateScaling::sqrt);
  ASSERT_TRUE(read.failed_points_configuration->target.has_value());
  EXPECT_EQ(read.failed_points_configuration->target->metric, results::TargetMetric::accuracy);
  EXPECT_EQ(read.failed_points_configuration->target->value, 0.8);
  EXPECT_EQ(read.failed_points_configuration->evaluate_every, 20);

  // Held to the bounds a run's settings are: an accuracy target above 1 is damage.
  const hid_t h5 = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t group = H5Gopen2(h5, "failed_points", H5P_DEFAULT);
  H5Adelete(group, "target_value");
  results::hdf5::write_attribute(group, "target_value", 5.0);
  H5Gclose(group);
  H5Fclose(h5);
  expect_refused(path, "'target_value' is 5, outside (0, 1] for a target accuracy");
}

TEST_F(ResultsFile, NodeSharingProbesAreKeptAndADamagedOneIsRefused) {
  const fs::path path = directory_ / "probes.h5";
  auto file = sample_file({sample_record()});
  file.node_sharing_probes = {{8, "bf16", 1, 128, 8, 0.25, 0.2, 1.5},
                              {16, "bf16", 1, 128, 16, 0.3, 0.2, 1.7}};
  write_results(file, path, false);
  const auto read = read_results(path);
  ASSERT_EQ(read.node_sharing_probes.size(), 2u);
  EXPECT_EQ(read.node_sharing_probes[1].ranks, 16);
  EXPECT_EQ(read.node_sharing_probes[1].ranks_per_node, 16);
  EXPECT_EQ(read.node_sharing_probes[1].batch_per_rank, 128);
  EXPECT_EQ(read.node_sharing_probes[1].precision, "bf16");
  EXPECT_EQ(read.node_sharing_probes[0].shared_seconds, 0.25);
  EXPECT_EQ(read.node_sharing_probes[0].alone_seconds, 0.2);
  EXPECT_EQ(read.node_sharing_probes[0].probe_seconds, 1.5);

  // predict divides by the alone time: a zero there is damage, named in one line.
  const hid_t h5 = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t alone = H5Dopen2(h5, "node_sharing_probes/alone_seconds", H5P_DEFAULT);
  const std::vector<double> zeros(2, 0.0);
  H5Dwrite(alone, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
  H5Dclose(alone);
  H5Fclose(h5);
  expect_refused(path, "node_sharing_probes/alone_seconds[0] is 0");
}

// A file whose numbers contradict each other is refused in one line naming the file, before the
// reader allocates what the damage declares.
TEST_F(ResultsFile, DamagedFilesAreRefusedInOneLine) {
  const auto damage = [&](const std::string& name, const std::function<void(hid_t run)>& edit) {
    expect_damaged(name, edit);
  };
  const auto set_integer = [](hid_t object, const char* name, long long value) {
    H5Adelete(object, name);
    results::hdf5::write_attribute(object, name, value);
  };
  damage("zero-ranks", [&](hid_t run) { set_integer(run, "world_size", 0); });
  damage("huge-ranks", [&](hid_t run) { set_integer(run, "world_size", 1LL << 40); });
  damage("more-iterations", [&](hid_t run) { set_integer(run, "measured_iterations", 1000); });
  damage("negative-time", [&](hid_t run) {
    const hid_t timings = H5Dopen2(run, "timings", H5P_DEFAULT);
    std::vector<double> values(3 * 2 * phase_count, -1.0);
    H5Dwrite(timings, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(timings);
  });
  damage("zero-steps", [&](hid_t run) {
    const hid_t timings = H5Dopen2(run, "timings", H5P_DEFAULT);
    std::vector<double> values(3 * 2 * phase_count, 0.0);
    H5Dwrite(timings, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(timings);
  });
  damage("short-gflops", [&](hid_t run) {
    H5Ldelete(run, "summary/gflops_per_rank", H5P_DEFAULT);
    const hid_t summary = H5Gopen2(run, "summary", H5P_DEFAULT);
    results::hdf5::write_dataset(summary, "gflops_per_rank", std::vector<double>{1.0}, {1});
    H5Gclose(summary);
  });
}

TEST_F(ResultsFile, TextFromTheFileIsReadPrintable) {
  RunRecord record = sample_record();
  record.configuration.model = "\x1b[2Jfcn\nx";
  record.environment.rank_hosts = {"node-a\u202e", "node-b"};
  const fs::path path = directory_ / "text.h5";
  write_results(sample_file({record}), path, false);
  const RunRecord read = read_results(path).runs.at(0);
  EXPECT_EQ(read.configuration.model, "\\x1b[2Jfcn\\nx");
  EXPECT_EQ(read.environment.rank_hosts.at(0), "node-a\\u202e");
}

// Schema-2 files from before the Slurm record and the host topology were kept.
TEST_F(ResultsFile, EarlySchema2FilesReadWithTheTopologyFromTheHosts) {
  const fs::path path = directory_ / "early.h5";
  write_results(sample_file({sample_record()}), path, false);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t run = H5Gopen2(file, "runs/run_000", H5P_DEFAULT);
  for (const char* name : {"slurm_job_id", "slurm_job_name", "slurm_node_list",
                           "slurm_tasks_per_node", "slurm_cpus_per_task", "slurm_array_task_id",
                           "slurm_node_exclusive", "intra_host_ring_hops", "inter_host_ring_hops"})
    ASSERT_GE(H5Adelete(run, name), 0) << name;
  ASSERT_GE(H5Ldelete(run, "ranks/local_rank", H5P_DEFAULT), 0);
  H5Gclose(run);
  H5Fclose(file);
  const RunRecord read = read_results(path).runs.at(0);
  EXPECT_EQ(read.environment.slurm.job_id, "");
  EXPECT_EQ(read.environment.slurm.node_exclusive, "unknown");
  EXPECT_EQ(read.environment.intra_host_ring_hops, 0);  // node-a -> node-b -> node-a
  EXPECT_EQ(read.environment.inter_host_ring_hops, 2);
  EXPECT_EQ(read.local_ranks, (std::vector<std::uint64_t>{0, 0}));
}

// Files from before the yardstick was measured twice hold only the faster rate.
TEST_F(ResultsFile, FilesWithoutTheYardsticksSpreadReadItAsNotMeasured) {
  const fs::path path = directory_ / "one_yardstick.h5";
  write_results(sample_file({sample_record()}), path, false);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t run = H5Gopen2(file, "runs/run_000", H5P_DEFAULT);
  for (const char* name : {"device_gemm_gflops_before", "device_gemm_gflops_after"})
    ASSERT_GE(H5Adelete(run, name), 0) << name;
  H5Gclose(run);
  H5Fclose(file);
  const RunRecord read = read_results(path).runs.at(0);
  EXPECT_EQ(read.environment.device_gemm_gflops, 51234.5);
  EXPECT_EQ(read.environment.device_gemm_gflops_before, 0);
  EXPECT_EQ(read.environment.device_gemm_gflops_after, 0);
}

// Schema 10: a language model's tokens per sample (a run attribute), and in the summary the job's
// tokens per second and the MFU, each NaN where a run has none.
TEST_F(ResultsFile, TokensPerSecondAndMfuAreWrittenAndReadBack) {
  const fs::path path = directory_ / "model_rates.h5";
  RunRecord language_model = sample_record();
  language_model.configuration.tokens_per_sample = 16;
  language_model.summary.tokens_per_second = 19752;
  language_model.summary.model_flops_utilisation = 0.375;
  RunRecord without_yardstick = sample_record();  // no tokens, no yardstick: both NaN
  write_results(sample_file({language_model, without_yardstick}), path, false);
  const auto file = read_results(path);
  const RunRecord& read = file.runs.at(0);
  EXPECT_EQ(read.configuration.tokens_per_sample, 16);
  EXPECT_EQ(read.summary.tokens_per_second, 19752);
  EXPECT_EQ(read.summary.model_flops_utilisation, 0.375);
  EXPECT_EQ(file.runs.at(1).configuration.tokens_per_sample, 0);
  EXPECT_TRUE(std::isnan(file.runs.at(1).summary.tokens_per_second));
  EXPECT_TRUE(std::isnan(file.runs.at(1).summary.model_flops_utilisation));
}

// Files before schema 10 hold what the MFU is derived from (the GFLOP/s per rank and the
// yardstick), but not a language model's tokens per sample: no tokens per second.
TEST_F(ResultsFile, FilesBeforeTheModelRatesDeriveTheMfuAndHaveNoTokens) {
  const fs::path path = directory_ / "before_model_rates.h5";
  RunRecord record = sample_record();
  record.configuration.tokens_per_sample = 16;
  record.summary.tokens_per_second = 19752;
  write_results(sample_file({record}), path, false);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t run = H5Gopen2(file, "runs/run_000", H5P_DEFAULT);
  ASSERT_GE(H5Adelete(run, "tokens_per_sample"), 0);
  const hid_t summary = H5Gopen2(run, "summary", H5P_DEFAULT);
  for (const char* name : {"tokens_per_second", "mfu"})
    ASSERT_GE(H5Adelete(summary, name), 0) << name;
  H5Gclose(summary);
  H5Gclose(run);
  H5Fclose(file);
  const RunRecord read = read_results(path).runs.at(0);
  EXPECT_EQ(read.configuration.tokens_per_sample, 0);
  EXPECT_TRUE(std::isnan(read.summary.tokens_per_second));
  // GFLOP/s per rank 1.5 and 1.25 against the 51234.5 GFLOP/s yardstick.
  EXPECT_DOUBLE_EQ(read.summary.model_flops_utilisation, (1.5 + 1.25) / 2 / 51234.5);
}

// Files before schema 7 recorded a run's precision, where at all, as the device property; their
// tables have no precision column and read as fp32.
TEST_F(ResultsFile, FilesBeforePrecisionWasRecordedReadItFromTheDevice) {
  const fs::path path = directory_ / "before_precision.h5";
  RunRecord record = sample_record();
  record.environment.device_properties.emplace_back("precision", "bf16");
  RunRecord plain = sample_record();
  plain.configuration.precision = "fp32";
  auto written = sample_file({record, plain});
  written.failed_points = {{4, "bf16", 2, 1, 64, 43, FailureCause::diverged, "diverged"}};
  write_results(written, path, false);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  for (const char* run_name : {"runs/run_000", "runs/run_001"}) {
    const hid_t run = H5Gopen2(file, run_name, H5P_DEFAULT);
    ASSERT_GE(H5Adelete(run, "precision"), 0) << run_name;
    H5Gclose(run);
  }
  ASSERT_GE(H5Ldelete(file, "failed_points/precision", H5P_DEFAULT), 0);
  H5Fclose(file);
  const auto read = read_results(path);
  EXPECT_EQ(read.runs.at(0).configuration.precision, "bf16");  // from the device property
  EXPECT_EQ(read.runs.at(1).configuration.precision, "fp32");  // sample_record has none
  EXPECT_EQ(read.failed_points.at(0).precision, "fp32");
}

TEST_F(ResultsFile, ExistingFileIsNeverClobberedWithoutOverwrite) {
  const fs::path path = directory_ / "precious.h5";
  std::ofstream(path) << "keep me";
  EXPECT_THROW(check_output_path(path, false), UserError);
  EXPECT_THROW(write_results(sample_file({sample_record()}), path, false), UserError);
  std::ifstream file(path);
  const std::string contents((std::istreambuf_iterator<char>(file)), {});
  EXPECT_EQ(contents, "keep me");
}

TEST_F(ResultsFile, OverwriteReplacesAnExistingFile) {
  const fs::path path = directory_ / "replace.h5";
  std::ofstream(path) << "old";
  EXPECT_NO_THROW(check_output_path(path, true));
  write_results(sample_file({sample_record()}), path, true);
  EXPECT_EQ(read_results(path).runs.at(0).loss, sample_record().loss);
}

TEST_F(ResultsFile, MissingOrUnwritableDirectoryIsRefused) {
  EXPECT_THROW(check_output_path(directory_ / "missing" / "run.h5", false), UserError);
  EXPECT_THROW(check_output_path("/proc/dlscale_test.h5", false), UserError);
  EXPECT_THROW(check_output_path(directory_, false), UserError);  // a directory, not a file
}

TEST_F(ResultsFile, FailedWriteLeavesNothingBehind) {
  // A file-size limit refuses the bytes as a full disk would, without killing the process.
  ASSERT_NE(std::signal(SIGXFSZ, SIG_IGN), SIG_ERR);
  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small_limit = old_limit;
  small_limit.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small_limit), 0);
  const fs::path path = directory_ / "failed.h5";
  try {
    write_atomically(path, false, std::string(65536, 'x'));
    ADD_FAILURE() << "a write past the file-size limit succeeded";
  } catch (const FileWriteError& error) {
    EXPECT_EQ(error.reason(), std::strerror(EFBIG));
    EXPECT_NE(std::string(error.what()).find(path.string()), std::string::npos) << error.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, SIG_DFL);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(directory_)) << "temporary file left behind";
}

TEST_F(ResultsFile, ReadingANonResultsFileIsAUserError) {
  const fs::path path = directory_ / "not.h5";
  std::ofstream(path) << "plain text";
  EXPECT_THROW(read_results(path), UserError);
  EXPECT_THROW(read_results(directory_ / "absent.h5"), UserError);
}

// predict replays the buckets on the layers: a layer index out of range or negative is damage,
// not an internal error (issue 21, item 19).
TEST_F(ResultsFile, BucketsNamingLayersThatDoNotExistAreRefused) {
  // The sample has 3 layers and buckets {2, 2} and {0, 0}.
  expect_damaged(
      "bucket-beyond-layers",
      [](hid_t run) {
        write_integers(run, "buckets/last_layer", {7, 0});
      },
      "bucket 0 holds layers 2 to 7, not within 0 to 2");
  expect_damaged(
      "bucket-negative-layer",
      [](hid_t run) {
        write_integers(run, "buckets/first_layer", {2, -1});
      },
      "bucket 1 holds layers -1 to 0");
}

// What the report refuses, every reader refuses, so that merge never writes it (item 21): the
// bounds of results/value_bounds.hpp.
TEST_F(ResultsFile, ValuesBeyondTheBoundsAreRefused) {
  const auto timings_with = [](double step) {
    return [step](hid_t run) {
      std::vector<double> values(3 * 2 * phase_count, 0.001);
      values[index_of(Phase::step)] = step;
      write_doubles(run, "timings", values);
    };
  };
  expect_damaged("step-1e29", timings_with(1e29), "timings hold a step of 1e+29 s");
  expect_damaged("step-1e300", timings_with(1e300), "timings hold a step of 1e+300 s");
  expect_damaged("step-subnormal", timings_with(5e-324), "timings hold a step of 5e-324 s");
  expect_damaged(
      "nan-statistics",
      [](hid_t run) {
        std::vector<double> table(phase_count * 6, 0.5);
        table[3] = std::nan("");
        write_doubles(run, "summary/phase_statistics", table);
      },
      "'phase_statistics' is nan");
  expect_damaged(
      "infinite-measurement",
      [](hid_t run) {
        write_doubles(run, "measurements/peak_resident_bytes/value",
                      {std::numeric_limits<double>::infinity(), 0});
      },
      "measurement 'peak_resident_bytes' holds inf");
  expect_damaged(
      "nan-layer-time",
      [](hid_t run) {
        write_doubles(run, "layers/backward_seconds", std::vector<double>(3 * 2 * 3, std::nan("")));
      },
      "dataset 'backward_seconds' holds nan s");
  expect_damaged(
      "negative-mfu",
      [](hid_t run) {
        const hid_t summary = H5Gopen2(run, "summary", H5P_DEFAULT);
        H5Adelete(summary, "mfu");
        hdf5::write_attribute(summary, "mfu", -0.5);
        H5Gclose(summary);
      },
      "'mfu' is -0.5");
}

// dlscale writes each object under one name: soft and external links, and hard links that give an
// object several names (a small file read as thousands of runs), are refused before any reading.
TEST_F(ResultsFile, LinksAndObjectsOfSeveralNamesAreRefused) {
  expect_damaged(
      "external-link",
      [](hid_t run) {
        H5Ldelete(run, "buckets", H5P_DEFAULT);
        H5Lcreate_external("elsewhere.h5", "/runs/run_000/buckets", run, "buckets", H5P_DEFAULT,
                           H5P_DEFAULT);
      },
      "/runs/run_000/buckets is a link (external), which dlscale never writes");
  expect_damaged(
      "soft-link",
      [](hid_t run) {
        H5Lcreate_soft("/runs/run_000/timings", run, "timings_again", H5P_DEFAULT, H5P_DEFAULT);
      },
      "/runs/run_000/timings_again is a link (soft)");
  expect_damaged(
      "hard-link",
      [](hid_t run) { H5Lcreate_hard(run, ".", run, "myself_again", H5P_DEFAULT, H5P_DEFAULT); },
      "has 2 names (hard links)");
}

TEST_F(ResultsFile, ARunCountBeyondTheBoundIsRefused) {
  const fs::path path = directory_ / "many-runs.h5";
  write_results(sample_file({sample_record()}), path, false);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(file, "run_count");
  results::hdf5::write_attribute(file, "run_count", 1LL << 40);
  H5Fclose(file);
  EXPECT_THROW(read_results(path), UserError);
}

// A FIFO would block the reader forever (no CPU time passes to end it): refused before opening.
TEST_F(ResultsFile, OnlyRegularFilesAreRead) {
  const fs::path fifo = directory_ / "fifo.h5";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    read_results(fifo);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("is not a regular file"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(read_results(directory_), UserError);
}

// An output is never one of the inputs, by any name: not even --overwrite allows it (item 16).
TEST_F(ResultsFile, AnOutputThatIsAnInputIsRefused) {
  const fs::path input = directory_ / "study.h5";
  std::ofstream(input) << "study";
  fs::create_hard_link(input, directory_ / "alias.h5");
  EXPECT_THROW(check_output_is_not_an_input(input, {input}, "--json"), UserError);
  EXPECT_THROW(check_output_is_not_an_input(directory_ / "alias.h5", {input}, "--json"), UserError);
  EXPECT_THROW(check_output_is_not_an_input(directory_ / "." / "study.h5", {input}, "--json"),
               UserError);
  EXPECT_NO_THROW(check_output_is_not_an_input(directory_ / "new.json", {input, ""}, "--json"));
}

}  // namespace
}  // namespace dlscale::results
