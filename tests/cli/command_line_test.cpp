// dlscale as a user runs it, under mpirun: a bad option, model spec, file or output path gives one
// error line naming the problem and a non-zero exit on every rank within seconds; a good run
// writes its results file, and an existing file is never clobbered.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/scaling_study.hpp"
#include "results/reader.hpp"
#include "results/schema.hpp"
#include "results/writer.hpp"
#include "tests/cli/dlscale_under_mpirun.hpp"
#include "workloads/workload_registry.hpp"

namespace {

namespace fs = std::filesystem;
using dlscale::testing::Outcome;

class CommandLine : public dlscale::testing::DlscaleUnderMpirun {};

TEST_F(CommandLine, UnknownModelIsRefused) { expect_refused("--model nonsense", "nonsense"); }

TEST_F(CommandLine, ZeroOrNegativeNumbersAreRefused) {
  expect_refused("--batch 0", "--batch");
  expect_refused("--iters -4", "--iters");
  expect_refused("--threads 0", "--threads");
}

TEST_F(CommandLine, UnknownShardingAndWhatFullShardingCannotDoAreRefused) {
  expect_refused("--model fcn:8,4 --sharding zero4", "--sharding");
  expect_refused("--model fcn:8,4 --sharding none,full --shard-unit-mb 0", "--shard-unit-mb");
  expect_refused("--model fcn:8,4 --sharding full --shard-unit-mb -1", "--shard-unit-mb");
  expect_refused("--model fcn:8,4 --sharding full --no-overlap", "--no-overlap");
  expect_refused("--model fcn:8,4 --sharding optimizer,full --eval-every 5", "--eval-every");
}

TEST_F(CommandLine, MalformedFcnSpecIsRefused) {
  expect_refused("--model fcn:784,,10", "fcn:784,,10");
  expect_refused("--model fcn:784", "fcn:784");
}

TEST_F(CommandLine, UnknownOptionAndUnreadableConfigAreRefused) {
  expect_refused("--frobnicate", "--frobnicate");
  expect_refused("--config /nonexistent/run.cfg", "/nonexistent/run.cfg");
}

TEST_F(CommandLine, UnknownSubcommandsStrayWordsAndAbbreviationsAreRefused) {
  expect_refused("reprot s.h5", "unknown subcommand 'reprot'");
  expect_refused("frobnicate", "unknown subcommand 'frobnicate'");
  expect_refused("--model fcn:8,4 extra", "unexpected argument 'extra'");
  expect_refused("--model fcn:8,4 --iter 3", "--iter");  // no guessing: --iters is meant
}

TEST_F(CommandLine, MoreThreadsThanLogicalCpusNeedOversubscribe) {
  expect_refused("--model fcn:8,4 --threads 1024", "--oversubscribe");
  expect_refused("--model fcn:8,4 --threads 1,1024", "logical CPUs");
}

// Open MPI binds each of two ranks to one core by default: two threads there would share it,
// and every number would look as if the device were that slow.
TEST_F(CommandLine, MoreThreadsThanTheCpusARankIsBoundToAreRefusedNamingBoth) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 logical CPUs";
  launcher_flags_ = "--bind-to core";
  expect_refused("--model fcn:8,4 --threads 2", "--threads 2 but rank 0 on ");
  expect_refused("--model fcn:8,4 --threads 2", "may run on only 1 CPU(s) (its affinity)");
  launcher_flags_ = "--bind-to none";
  const Outcome unbound =
      run_dlscale("--model fcn:8,4 --batch 4 --iters 2 --warmup 1 --threads 2 --out unbound.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(unbound.rank_exit_codes[r], 0) << "rank " << r;
}

TEST_F(CommandLine, ConfigThatIsNotASmallRegularFileIsRefusedAtOnce) {
  expect_refused("--config /dev/zero", "not a regular file");
  expect_refused("--config " + directory_.string(), "not a regular file");
  std::ofstream(directory_ / "nested.cfg") << "config = other.cfg\n";
  expect_refused("--config nested.cfg", "config =");
  std::ofstream(directory_ / "huge.cfg") << std::string(2 << 20, '#');
  expect_refused("--config huge.cfg", "larger than 1 MiB");
}

TEST_F(CommandLine, UnavailableDeviceOrBackendIsRefused) {
  expect_refused("--device tpu", "--device");
  expect_refused("--comm carrier-pigeon", "--comm");
}

TEST_F(CommandLine, BatchTooLargeForMemoryIsRefusedBeforeTraining) {
  expect_refused("--model fcn-s --batch 1000000", "--batch 1000000");
}

TEST_F(CommandLine, UnwritableOutputPathIsRefused) {
  expect_refused("--model fcn:8,4 --out /nonexistent-dir/r.h5", "/nonexistent-dir");
  expect_refused("--model fcn:8,4 --out /proc/r.h5", "/proc");
}

TEST_F(CommandLine, ExistingOutputFileIsRefusedAndKept) {
  std::ofstream(directory_ / "taken.h5") << "earlier results";
  expect_refused("--model fcn:8,4 --out taken.h5", "--overwrite");
  EXPECT_EQ(dlscale::testing::read_text_file(directory_ / "taken.h5"), "earlier results");
}

TEST_F(CommandLine, GoodRunWritesResultsAndReportsIdenticalParameters) {
  const Outcome outcome = run_dlscale("--model fcn:16,8,4 --batch 4 --iters 3 --out good.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  EXPECT_TRUE(outcome.error_lines.empty());
  EXPECT_TRUE(fs::exists(directory_ / "good.h5"));
  EXPECT_NE(outcome.stdout_text.find("bit-identical on all 2 ranks"), std::string::npos)
      << outcome.stdout_text;
  for (const auto& entry : fs::directory_iterator(directory_))
    EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos)
        << "left behind: " << entry.path();
}

// --log-level debug says, on rank 0 alone, how long the device took to make and where each
// point's set-up went (a short GPU benchmark spends more of its wall time there than training);
// --log-level warn, applied before the plan is made, leaves out even the info line.
TEST_F(CommandLine, LogLevelDebugTellsWhereTheSetUpWent) {
  const auto count = [](const std::string& text, const std::string& what) {
    std::size_t found = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++found;
    return found;
  };
  const Outcome debug = run_dlscale(
      "--model fcn:16,8,4 --batch 4 --iters 2 --ranks 1,2 --log-level debug --out debug.h5");
  EXPECT_EQ(debug.rank_exit_codes[0], 0);
  const std::string said = dlscale::testing::read_text_file(directory_ / "stderr.txt");
  EXPECT_EQ(count(said, "dlscale: debug: cpu device made in "), 1u) << said;
  EXPECT_EQ(count(said, "dlscale: debug: set-up of the point: "), 2u) << "one per point:\n" << said;
  for (const char* part : {"GEMM yardstick ", "network ", "data ", " s in all"})
    EXPECT_NE(said.find(part), std::string::npos) << part << " in:\n" << said;
  const Outcome quiet =
      run_dlscale("--model fcn:16,8,4 --batch 4 --iters 2 --log-level warn --out quiet.h5");
  EXPECT_EQ(quiet.rank_exit_codes[0], 0);
  const std::string quiet_said = dlscale::testing::read_text_file(directory_ / "stderr.txt");
  EXPECT_EQ(quiet_said.find("dlscale: info: "), std::string::npos) << quiet_said;
  EXPECT_EQ(quiet_said.find("dlscale: debug: "), std::string::npos) << quiet_said;
}

// --no-yardstick: no GEMM timed before or after the point (the set-up says nothing of one), and
// the summary says that no yardstick was measured where it would give the MFU.
TEST_F(CommandLine, NoYardstickLeavesTheGemmRateUnmeasured) {
  const Outcome outcome = run_dlscale(
      "--model fcn:16,8,4 --batch 4 --iters 2 --no-yardstick --log-level debug --out plain.h5");
  EXPECT_EQ(outcome.rank_exit_codes[0], 0);
  const std::string said = dlscale::testing::read_text_file(directory_ / "stderr.txt");
  EXPECT_NE(said.find("dlscale: debug: set-up of the point: "), std::string::npos) << said;
  EXPECT_EQ(said.find("GEMM yardstick "), std::string::npos) << said;
  EXPECT_NE(outcome.stdout_text.find("no GEMM yardstick measured"), std::string::npos)
      << outcome.stdout_text;
  EXPECT_EQ(outcome.stdout_text.find("MFU"), std::string::npos) << outcome.stdout_text;
}

TEST_F(CommandLine, OverwriteReplacesAnEarlierResultsFile) {
  std::ofstream(directory_ / "again.h5") << "earlier results";
  const Outcome outcome =
      run_dlscale("--model fcn:16,8,4 --batch 4 --iters 2 --out again.h5 --overwrite");
  EXPECT_EQ(outcome.rank_exit_codes[0], 0);
  EXPECT_NE(dlscale::testing::read_text_file(directory_ / "again.h5"), "earlier results");
}

// One test per built-in model, each with its own time: in one test, the largest (vgg-16) ran past
// the whole test's timeout on a 2-core machine that other builds kept busy.
class BuiltinModel : public dlscale::testing::DlscaleUnderMpirun,
                     public ::testing::WithParamInterface<std::string> {};

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  for (const auto& workload : dlscale::workloads::builtin_workloads())
    names.push_back(workload->name());
  return names;
}

TEST_P(BuiltinModel, TrainsOnTwoRanksWithIdenticalParameters) {
  const std::string name = GetParam();
  // vgg-16 took minutes with both cores busy; the hard timeout only catches a hang.
  constexpr int seconds_allowed = 1500;
  // A language model of a thousand tokens a sample (gpt2-small: 0.9 TFLOP a step of one sample)
  // takes two steps of one sample, as long as vgg-16's four of four.
  const bool large = dlscale::workloads::make_workload(name)->training_flops_per_sample() > 1e11;
  const Outcome outcome = run_dlscale(
      "--model " + name +
          (large ? " --batch 1 --iters 1 --warmup 1 " : " --batch 4 --iters 3 --warmup 1 ") +
          "--out " + name + ".h5",
      seconds_allowed);
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(outcome.rank_exit_codes[r], 0) << name << " on rank " << r;
  EXPECT_TRUE(fs::exists(directory_ / (name + ".h5"))) << name;
  EXPECT_NE(outcome.stdout_text.find("bit-identical on all 2 ranks"), std::string::npos)
      << name << ":\n"
      << outcome.stdout_text;
}

INSTANTIATE_TEST_SUITE_P(EveryBuiltinModel, BuiltinModel,
                         ::testing::ValuesIn(builtin_model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST_F(CommandLine, RankSweepMistakesAreRefusedBeforeAnythingRuns) {
  expect_refused("--ranks 1,4", "only 2");
  expect_refused("--ranks 1,2 --global-batch 7", "--global-batch 7");
  expect_refused("--scaling strong", "--global-batch");
}

TEST_F(CommandLine, WeakSweepRunsEveryPointInOneLaunchAndOneFile) {
  const Outcome outcome = run_dlscale(
      "--model fcn:16,8,4 --batch 4 --iters 3 --warmup 1 --ranks 1,2 --bucket-mb 0.0001 "
      "--out sweep.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  EXPECT_TRUE(outcome.error_lines.empty());
  EXPECT_NE(outcome.stdout_text.find("one rank: no replicas to compare"), std::string::npos);
  EXPECT_NE(outcome.stdout_text.find("bit-identical on all 2 ranks"), std::string::npos);
  EXPECT_NE(outcome.stdout_text.find("weak scaling against 1 rank"), std::string::npos)
      << outcome.stdout_text;
  EXPECT_TRUE(fs::exists(directory_ / "sweep.h5"));
}

// Issue 31 item 8: each point's summary ends in its verdict, the study in its own, and a
// reason a measurement is absent is said by the first point it is absent in, not by each.
TEST_F(CommandLine, EachAbsentReasonIsSaidOncePerLaunchAndEveryPointEndsInAVerdict) {
  const Outcome outcome =
      run_dlscale("--model fcn:16,8,4 --batch 4 --iters 3 --warmup 1 --ranks 1,2 --out absent.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  const std::string& text = outcome.stdout_text;
  std::istringstream lines(text);
  std::vector<std::string> reasons;
  int verdicts = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("verdict ", 0) == 0) ++verdicts;
    const auto at = line.find("absent: ");
    if (at == std::string::npos) continue;
    const std::string reason = line.substr(at + 8);
    EXPECT_EQ(std::count(reasons.begin(), reasons.end(), reason), 0)
        << "said twice: " << reason << "\n"
        << text;
    reasons.push_back(reason);
  }
  EXPECT_FALSE(reasons.empty()) << text;
  EXPECT_NE(text.find("absent, for the reasons given above: "), std::string::npos) << text;
  EXPECT_EQ(verdicts, 2) << text;
  EXPECT_NE(text.find("study verdict   at 2 ranks, the most: "), std::string::npos) << text;
}

// --quiet: one line per point, the study's verdict and where the results are; nothing else.
TEST_F(CommandLine, QuietPrintsOneLinePerPoint) {
  const Outcome outcome = run_dlscale(
      "--model fcn:16,8,4 --batch 4 --iters 3 --warmup 1 --ranks 1,2 --quiet --out quiet.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  std::istringstream lines(outcome.stdout_text);
  std::vector<std::string> printed;
  for (std::string line; std::getline(lines, line);) printed.push_back(line);
  ASSERT_EQ(printed.size(), 4u) << outcome.stdout_text;
  EXPECT_EQ(printed[0].rfind("1 rank x1 thread fp32, batch 4/rank: ", 0), 0u) << printed[0];
  EXPECT_NE(printed[0].find("compute-bound: one rank"), std::string::npos) << printed[0];
  EXPECT_EQ(printed[1].rfind("2 ranks x1 thread fp32, batch 4/rank: ", 0), 0u) << printed[1];
  EXPECT_NE(printed[1].find("-bound: compute "), std::string::npos) << printed[1];
  EXPECT_EQ(printed[2].rfind("study verdict   at 2 ranks", 0), 0u) << printed[2];
  EXPECT_EQ(printed[3].rfind("results ", 0), 0u) << printed[3];
  EXPECT_TRUE(fs::exists(directory_ / "quiet.h5"));
}

TEST_F(CommandLine, SampledResourcesAreSummarizedAndWritten) {
  const Outcome outcome = run_dlscale(
      "--model fcn:64,32,4 --batch 8 --iters 200 --sample-interval 0.02 --out sampled.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  for (const char* expected : {"process_cpu_cores", "cores mean", "process_rss_bytes", "MiB peak",
                               "host_cpu_utilisation_percent"})
    EXPECT_NE(outcome.stdout_text.find(expected), std::string::npos)
        << "the summary lacks '" << expected << "':\n"
        << outcome.stdout_text;
  EXPECT_TRUE(fs::exists(directory_ / "sampled.h5"));
}

TEST_F(CommandLine, ThreadSweepWithRepeatsIsOneStudyWithTheSpread) {
  launcher_flags_ = "--bind-to none";  // two threads per rank need two CPUs each
  const Outcome outcome = run_dlscale(
      "--model fcn:64,32,4 --batch 8 --iters 3 --warmup 1 --threads 1,2 --repeat 3 "
      "--sample-interval 0 --out repeats.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  const std::string& text = outcome.stdout_text;
  EXPECT_NE(text.find("across repeats: mean +- sample standard deviation"), std::string::npos)
      << text;
  // Six runs (2 thread counts x 3 repeats) in the study, one spread row per thread count.
  std::size_t summaries = 0;
  for (std::size_t at = text.find("bit-identical"); at != std::string::npos;
       at = text.find("bit-identical", at + 1))
    ++summaries;
  EXPECT_EQ(summaries, 6u) << text;
  EXPECT_TRUE(fs::exists(directory_ / "repeats.h5"));
}

// --precision bf16 trains a CNN's convolutions and GEMMs in bf16 on every rank, and
// --grad-dtype bf16 sums the gradients in bf16; the replicas still end bit-identical, and every
// run records its precision and gradient dtype.
// A precision sweep in one launch: every point of both precisions ends bit-identical, records its
// precision, and is measured against the baseline of its own precision.
TEST_F(CommandLine, PrecisionSweepRunsEndBitIdenticalEachAgainstItsOwnBaseline) {
  const Outcome outcome = run_dlscale(
      "--model alexnet-r --batch 4 --iters 3 --warmup 1 --precision fp32,bf16 --ranks 1,2 "
      "--sample-interval 0 --out bf16.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << outcome.stdout_text;
  const auto file = dlscale::results::read_results(directory_ / "bf16.h5");
  ASSERT_EQ(file.runs.size(), 4u);
  const std::vector<std::string> precisions = {"fp32", "fp32", "bf16", "bf16"};
  for (std::size_t k = 0; k < file.runs.size(); ++k) {
    const auto& run = file.runs[k];
    EXPECT_TRUE(run.summary.parameters_identical) << "at " << run.ranks << " ranks";
    EXPECT_EQ(run.configuration.precision, precisions[k]) << "run " << k;
    const auto& properties = run.environment.device_properties;
    const auto precision =
        std::find_if(properties.begin(), properties.end(),
                     [](const auto& property) { return property.first == "precision"; });
    ASSERT_NE(precision, properties.end());
    EXPECT_EQ(precision->second, precisions[k]) << "run " << k;
  }
  const auto study = dlscale::analysis::analyze_study(file.runs);
  ASSERT_EQ(study.points.size(), 4u);
  for (const auto& point : study.points)
    if (point.ranks == 1) EXPECT_DOUBLE_EQ(point.efficiency, 1.0) << point.precision;
  EXPECT_EQ(study.points[2].precision, "bf16");
  EXPECT_NE(outcome.stdout_text.find("at the same precision:"), std::string::npos)
      << outcome.stdout_text;

  // bf16 gradient sums as well, through each CPU backend: still bit-identical, and recorded.
  for (const std::string comm : {"mpi", "mpi-nbc", "mpi-hier"}) {
    SCOPED_TRACE(comm);
    const std::string out = "bf16_sums_" + comm + ".h5";
    const Outcome summed = run_dlscale(
        "--model fcn:64,32,4 --batch 8 --iters 3 --warmup 1 --grad-dtype bf16 --ranks 1,2 "
        "--sample-interval 0 --comm " +
        comm + " --out " + out);
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(summed.rank_exit_codes[r], 0) << summed.stdout_text;
    for (const auto& run : dlscale::results::read_results(directory_ / out).runs) {
      EXPECT_TRUE(run.summary.parameters_identical) << "at " << run.ranks << " ranks";
      EXPECT_EQ(run.configuration.gradient_dtype, "bf16");
    }
  }
}

TEST_F(CommandLine, FailedSweepPointsAreKeptWithTheirReasonAndTheSweepGoesOn) {
  // Every point over its time limit: both are kept, with the reason, and the exit status says so.
  const Outcome timed_out = run_dlscale(
      "--model fcn:64,32,4 --batch 8 --iters 5 --ranks 1,2 --point-timeout 1e-9 "
      "--out timeout.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(timed_out.rank_exit_codes[r], 3) << "rank " << r;
  EXPECT_NE(timed_out.stdout_text.find("exceeded --point-timeout 1e-09 s at iteration 0"),
            std::string::npos)
      << timed_out.stdout_text;
  ASSERT_TRUE(fs::exists(directory_ / "timeout.h5"));
  for (const auto& point : dlscale::results::read_results(directory_ / "timeout.h5").failed_points)
    EXPECT_EQ(point.cause, dlscale::FailureCause::timed_out);

  // A sweep none of whose points can fit would measure nothing: it is refused in one line before
  // anything is allocated, and no results file is written (a sweep where some points fit keeps
  // the others as failed points, as above).
  expect_refused("--model fcn-s --batch 1000000 --ranks 1,2 --sample-interval 0 --out too_big.h5",
                 "no point of the sweep fits");
  expect_refused("--model gpt:2,64,4,200000,128 --batch 2 --ranks 1,2 --out too_long.h5",
                 "out of memory (estimate");
  EXPECT_FALSE(fs::exists(directory_ / "too_big.h5"));
  EXPECT_FALSE(fs::exists(directory_ / "too_long.h5"));

  // A learning rate of 1e6 blows up a residual net within a few steps: a point that diverges is
  // kept as a row of the study table, and the sweep still runs every point.
  const Outcome diverged = run_dlscale(
      "--model resnet-56 --batch 4 --iters 8 --warmup 1 --ranks 1,2 --lr 1e6 "
      "--sample-interval 0 --out diverged.h5");
  EXPECT_NE(diverged.stdout_text.find("diverged at iteration"), std::string::npos)
      << diverged.stdout_text;
  EXPECT_NE(diverged.stdout_text.find(" ranks    iter ms"), std::string::npos)
      << "the study table was not printed:\n"
      << diverged.stdout_text;
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(diverged.rank_exit_codes[r], 3) << "rank " << r;
  const auto file = dlscale::results::read_results(directory_ / "diverged.h5");
  EXPECT_EQ(file.runs.size() + file.failed_points.size(), 2u)
      << "the sweep did not go on past the failed point";
  ASSERT_FALSE(file.failed_points.empty());
  EXPECT_NE(file.failed_points.front().reason.find("diverged at iteration"), std::string::npos);
  EXPECT_EQ(file.failed_points.front().cause, dlscale::FailureCause::diverged);
}

TEST_F(CommandLine, TrainingToATargetRecordsTimeToItTheNoiseScaleAndGoodput) {
  // The prototype task on 64 inputs is learnt within a few dozen steps at this rate.
  const Outcome outcome = run_dlscale(
      "--model fcn:64,32,4 --batch 8 --warmup 1 --ranks 1,2 --lr 0.05 --target-accuracy 0.9 "
      "--eval-every 5 --eval-samples 256 --sample-interval 0 --out target.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  EXPECT_NE(outcome.stdout_text.find("to target       accuracy 0.9 after"), std::string::npos)
      << outcome.stdout_text;
  EXPECT_NE(outcome.stdout_text.find("noise scale     B_noise"), std::string::npos)
      << outcome.stdout_text;
  EXPECT_NE(outcome.stdout_text.find("goodput/s"), std::string::npos) << outcome.stdout_text;
  const auto file = dlscale::results::read_results(directory_ / "target.h5");
  ASSERT_EQ(file.runs.size(), 2u);
  for (const auto& run : file.runs) {
    ASSERT_TRUE(run.summary.target_reached) << "ranks " << run.ranks;
    const auto& reached = *run.summary.target_reached;
    EXPECT_EQ(reached.iterations % 5, 0) << "targets are met at evaluations, every 5 steps";
    EXPECT_EQ(reached.samples, double(reached.iterations) * 8 * run.ranks);
    EXPECT_GE(run.evaluations.back().accuracy, 0.9);
    // Training stopped at the evaluation that met the target.
    EXPECT_EQ(run.iterations, reached.iterations);
    EXPECT_EQ(run.ranks == 1, std::isnan(run.summary.noise_scale)) << run.ranks;
  }
  EXPECT_GT(file.runs[1].summary.noise_scale, 0);
  const auto study = dlscale::analysis::analyze_study(file.runs);
  EXPECT_GT(study.points[1].statistical_efficiency, 0);
  EXPECT_GT(study.points[1].goodput_samples_per_second, 0);

  // A limit too small to learn anything in: each point fails with the best it reached.
  const Outcome short_of_it = run_dlscale(
      "--model fcn:64,32,4 --batch 8 --warmup 0 --ranks 1,2 --target-accuracy 1 "
      "--eval-every 1 --max-samples 16 --sample-interval 0 --out short.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(short_of_it.rank_exit_codes[r], 3) << "rank " << r;
  const auto short_file = dlscale::results::read_results(directory_ / "short.h5");
  ASSERT_EQ(short_file.failed_points.size(), 2u);
  for (const auto& point : short_file.failed_points) {
    EXPECT_EQ(point.cause, dlscale::FailureCause::target_not_reached);
    EXPECT_NE(point.reason.find("short of the target 1 within the --max-samples limit of 16"),
              std::string::npos)
        << point.reason;
  }

  // The Markov task cannot be predicted better than about one token in two.
  expect_refused("--model lstm:4,8,1,16 --target-accuracy 0.9", "cannot be reached");
}

TEST_F(CommandLine, LearningRateScalingTrainsEachPointAtItsGlobalBatchsRate) {
  const Outcome outcome = run_dlscale(
      "--model fcn:16,8,4 --batch 4 --iters 2 --warmup 0 --ranks 1,2 --lr 0.01 "
      "--lr-scaling linear --warmup-steps 1 --sample-interval 0 --out rates.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  const auto file = dlscale::results::read_results(directory_ / "rates.h5");
  ASSERT_EQ(file.runs.size(), 2u);
  for (const auto& run : file.runs) {
    const auto& config = run.configuration;
    EXPECT_EQ(config.learning_rate_scaling, dlscale::results::LearningRateScaling::linear);
    EXPECT_EQ(config.base_learning_rate, 0.01);
    EXPECT_EQ(config.learning_rate_warmup_steps, 1);
    EXPECT_FALSE(config.target.has_value());
    // Global batch 4 is the sweep's smallest: 0.01 there, twice that at 8.
    EXPECT_DOUBLE_EQ(config.learning_rate, 0.01 * run.ranks) << "ranks " << run.ranks;
  }
}

TEST_F(CommandLine, AdamWTrainsIdenticalReplicasAndIsRecorded) {
  const Outcome outcome = run_dlscale(
      "--model fcn:16,8,4 --batch 4 --iters 3 --warmup 1 --ranks 1,2 --optimizer adamw "
      "--sample-interval 0 --out adamw.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  const auto file = dlscale::results::read_results(directory_ / "adamw.h5");
  ASSERT_EQ(file.runs.size(), 2u);
  for (const auto& run : file.runs) {
    EXPECT_EQ(run.configuration.optimizer, dlscale::results::OptimizerKind::adamw);
    EXPECT_EQ(run.configuration.weight_decay, 0.01);
    EXPECT_TRUE(run.summary.parameters_identical) << "ranks " << run.ranks;
  }
}

// ZeRO-1 with AdamW at 1 and 2 ranks: every point trains, the replicas end bit-identical (the
// parameters all-gathered after each rank's update of its shard), and the strategy is recorded.
TEST_F(CommandLine, ShardedOptimizerTrainsIdenticalReplicasAndIsRecorded) {
  const Outcome outcome = run_dlscale(
      "--model fcn:16,8,4 --batch 4 --iters 3 --warmup 1 --ranks 1,2 --optimizer adamw "
      "--sharding optimizer --bucket-mb 0.0001 --sample-interval 0 --out zero1.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  const auto file = dlscale::results::read_results(directory_ / "zero1.h5");
  ASSERT_EQ(file.runs.size(), 2u);
  for (const auto& run : file.runs) {
    EXPECT_EQ(run.configuration.sharding, dlscale::results::Sharding::optimizer);
    EXPECT_TRUE(run.summary.parameters_identical) << "ranks " << run.ranks;
  }
}

// Runs a dlscale subcommand that needs no mpirun; returns its exit status and stderr.
std::pair<int, std::string> run_alone(const fs::path& directory, const std::string& arguments) {
  const std::string command = "cd " + directory.string() + " && " + DLSCALE_EXECUTABLE + " " +
                              arguments + " > alone.out 2> alone.err";
  const int status = std::system(command.c_str());
  return {WEXITSTATUS(status), dlscale::testing::read_text_file(directory / "alone.err")};
}

// --help is a switch: it was refused as an empty value by predict and merge.
TEST_F(CommandLine, EverySubcommandWithoutMpirunShowsItsHelp) {
  for (const char* subcommand : {"predict", "merge", "report", "slurm", "schema"}) {
    const auto [status, errors] = run_alone(directory_, std::string(subcommand) + " --help");
    EXPECT_EQ(status, 0) << subcommand << ": " << errors;
    EXPECT_EQ(errors, "") << subcommand;
  }
}

TEST_F(CommandLine, MergeJoinsRunsOfOneWorkloadAndRefusesOthers) {
  const std::string common = "--model fcn:16,8,4 --iters 2 --warmup 0 ";
  ASSERT_EQ(run_dlscale(common + "--batch 4 --ranks 1 --out one.h5").rank_exit_codes[0], 0);
  ASSERT_EQ(run_dlscale(common + "--batch 4 --out two.h5").rank_exit_codes[0], 0);
  ASSERT_EQ(run_dlscale(common + "--batch 8 --out other.h5").rank_exit_codes[0], 0);

  auto [status, errors] = run_alone(directory_, "merge one.h5 two.h5 -o study.h5");
  EXPECT_EQ(status, 0) << errors;
  EXPECT_TRUE(fs::exists(directory_ / "study.h5"));
  // The merged study is a results file like any other: predict reads it.
  std::tie(status, errors) = run_alone(directory_, "predict study.h5 --network 10Gbps,5us");
  EXPECT_EQ(status, 0) << errors;

  std::tie(status, errors) = run_alone(directory_, "merge one.h5 other.h5 -o refused.h5");
  EXPECT_EQ(status, 2);
  EXPECT_NE(errors.find("batch per rank"), std::string::npos) << errors;
  EXPECT_FALSE(fs::exists(directory_ / "refused.h5"));
  std::tie(status, errors) = run_alone(directory_, "merge two.h5 two.h5 -o refused.h5");
  EXPECT_EQ(status, 2);
  EXPECT_NE(errors.find("are the same run, given twice"), std::string::npos) << errors;
  std::tie(status, errors) = run_alone(directory_, "merge one.h5 two.h5 -o study.h5");
  EXPECT_EQ(status, 2) << "an existing study must not be clobbered";
}

TEST_F(CommandLine, MergeKeepsPointsMeasuredBySeveralJobsAsRepeats) {
  // Two jobs of a `--ranks all` node study: both measure 1 rank, the second also 2.
  const std::string common = "--model fcn:16,8,4 --batch 4 --iters 2 --warmup 0 ";
  ASSERT_EQ(run_dlscale(common + "--ranks 1 --out job1.h5").rank_exit_codes[0], 0);
  ASSERT_EQ(run_dlscale(common + "--ranks all --out job2.h5").rank_exit_codes[0], 0);
  const auto [status, errors] = run_alone(directory_, "merge job1.h5 job2.h5 -o study.h5");
  ASSERT_EQ(status, 0) << errors;
  EXPECT_NE(dlscale::testing::read_text_file(directory_ / "alone.out")
                .find("merged 3 runs from 2 files into study.h5"),
            std::string::npos);

  const auto study = dlscale::results::read_results(directory_ / "study.h5");
  ASSERT_EQ(study.runs.size(), 3u);
  const std::vector<std::pair<int, int>> ranks_and_repeats = {{1, 0}, {1, 1}, {2, 0}};
  for (std::size_t k = 0; k < study.runs.size(); ++k)
    EXPECT_EQ(std::pair(study.runs[k].ranks, study.runs[k].configuration.repeat),
              ranks_and_repeats[k])
        << "run " << k << ": repeats are numbered per point in input order";
  // The study table is derived data (the reader leaves it out): recompute it from the runs.
  const auto spread = dlscale::analysis::analyze_study(study.runs).configurations;
  ASSERT_EQ(spread.size(), 2u);
  EXPECT_EQ(spread[0].ranks, 1);
  EXPECT_EQ(spread[0].repeats, 2) << "the spread covers both jobs' 1-rank runs";
  EXPECT_NE(dlscale::testing::read_text_file(directory_ / "alone.out").find("across repeats"),
            std::string::npos)
      << "merge prints the spread over repeats";

  // A merged study with one of its inputs again: job1's run, renumbered repeat 1 in the study,
  // is still the same run.
  const auto [again, again_errors] = run_alone(directory_, "merge study.h5 job1.h5 -o again.h5");
  EXPECT_EQ(again, 2);
  EXPECT_NE(again_errors.find("same run, given twice"), std::string::npos) << again_errors;
}

// An fp32 job and a bf16 job merge into one study: precisions may differ between inputs, each
// measured against its own baseline, and a 1-rank run of each is not a repeat of the other's.
TEST_F(CommandLine, MergeJoinsPrecisionsEachAgainstItsOwnBaseline) {
  const std::string common = "--model fcn:16,8,4 --batch 4 --iters 2 --warmup 0 --ranks 1,2 ";
  ASSERT_EQ(run_dlscale(common + "--precision fp32 --out fp32.h5").rank_exit_codes[0], 0);
  ASSERT_EQ(run_dlscale(common + "--precision bf16 --out bf16.h5").rank_exit_codes[0], 0);
  const auto [status, errors] = run_alone(directory_, "merge fp32.h5 bf16.h5 -o study.h5");
  ASSERT_EQ(status, 0) << errors;
  const auto runs = dlscale::results::read_results(directory_ / "study.h5").runs;
  ASSERT_EQ(runs.size(), 4u);
  for (const auto& run : runs) EXPECT_EQ(run.configuration.repeat, 0);
  const auto study = dlscale::analysis::analyze_study(runs);
  ASSERT_EQ(study.configurations.size(), 4u);
  EXPECT_EQ(study.configurations[2].precision, "bf16");
  for (const auto& point : study.points)
    if (point.ranks == 1) EXPECT_DOUBLE_EQ(point.efficiency, 1.0) << point.precision;
}

TEST_F(CommandLine, MergeKeepsFailedPointsAndSlurmJobsThatLeftNoFile) {
  ASSERT_EQ(run_dlscale("--model fcn:16,8,4 --batch 4 --iters 2 --warmup 0 --ranks 1 --out job1.h5")
                .rank_exit_codes[0],
            0);
  auto [status, errors] = run_alone(
      directory_, "merge job1.h5 --missing-job '4242:4:CANCELLED, exit code 0:15' -o study.h5");
  ASSERT_EQ(status, 0) << errors;
  EXPECT_NE(dlscale::testing::read_text_file(directory_ / "alone.out")
                .find("merged 1 run from 1 file into study.h5"),
            std::string::npos);
  const auto study = dlscale::results::read_results(directory_ / "study.h5");
  ASSERT_EQ(study.failed_points.size(), 1u);
  EXPECT_EQ(study.failed_points[0].ranks, 4);
  EXPECT_EQ(study.failed_points[0].cause, dlscale::FailureCause::job_left_no_results);
  EXPECT_EQ(study.failed_points[0].reason,
            "Slurm job 4242 left no results file (CANCELLED, exit code 0:15)");

  // A job whose every point failed (exit 3) left a file with no runs: its failed points join.
  ASSERT_EQ(run_dlscale("--model fcn:16,8,4 --batch 4 --iters 2 --warmup 0 --ranks 2 "
                        "--point-timeout 1e-9 --out failed.h5")
                .rank_exit_codes[0],
            3);
  std::tie(status, errors) = run_alone(directory_, "merge job1.h5 failed.h5 -o with_failed.h5");
  ASSERT_EQ(status, 0) << errors;
  const auto with_failed = dlscale::results::read_results(directory_ / "with_failed.h5");
  EXPECT_EQ(with_failed.runs.size(), 1u);
  ASSERT_EQ(with_failed.failed_points.size(), 1u);
  EXPECT_EQ(with_failed.failed_points[0].ranks, 2);

  // A job stopped before its first point ended left a file with nothing in it: left out, with
  // a line, and the others still merge.
  dlscale::results::ResultsFile nothing_yet;
  nothing_yet.status = dlscale::results::schema::status_running;
  dlscale::results::write_results(nothing_yet, directory_ / "running.h5", false);
  std::tie(status, errors) = run_alone(directory_, "merge job1.h5 running.h5 -o without.h5");
  ASSERT_EQ(status, 0) << errors;
  EXPECT_NE(dlscale::testing::read_text_file(directory_ / "alone.out")
                .find("leaving out running.h5: it holds no runs and no failed points"),
            std::string::npos);

  for (const char* malformed : {"x:4:FAILED", "4242:0:FAILED", "4242:4:", "4242"}) {
    std::tie(status, errors) = run_alone(
        directory_, "merge job1.h5 --missing-job '" + std::string(malformed) + "' -o refused.h5");
    EXPECT_EQ(status, 2) << malformed;
    EXPECT_NE(errors.find("--missing-job"), std::string::npos) << malformed << ": " << errors;
  }
  EXPECT_FALSE(fs::exists(directory_ / "refused.h5"));
}

TEST_F(CommandLine, PredictRefusesBadInputInOneLine) {
  ASSERT_EQ(run_dlscale("--model fcn:16,8,4 --batch 4 --iters 2 --out p.h5").rank_exit_codes[0], 0);
  // Targets that are not regular files (a FIFO stands in for a device) are never replaced.
  ASSERT_EQ(::mkfifo((directory_ / "fifo").c_str(), 0644), 0);
  fs::create_symlink(directory_ / "elsewhere.json", directory_ / "link.json");
  for (const auto& [arguments, named] : std::vector<std::pair<std::string, std::string>>{
           {"predict p.h5 --network 1Gbps,1us --json fifo", "--json: 'fifo' exists and is not"},
           {"predict p.h5 --network 1Gbps,1us --json link.json", "symbolic link"},
           {"predict p.h5 --network 1Gbps,1us --json no/such/dir.json", "does not exist"},
           {"predict p.h5 --network fast", "--network 'fast'"},
           {"predict p.h5", "network model"},
           {"predict absent.h5 --network 1Gbps,1us", "absent.h5"},
           {"predict p.h5 --network 1Gbps,1us --ranks 0", "'0'"},
           {"predict p.h5 --network 1Gbps,1us --algorithm mesh", "mesh"}}) {
    const auto [status, errors] = run_alone(directory_, arguments);
    EXPECT_EQ(status, 2) << arguments;
    EXPECT_EQ(std::count(errors.begin(), errors.end(), '\n'), 1) << arguments << ": " << errors;
    EXPECT_NE(errors.find(named), std::string::npos) << arguments << ": " << errors;
  }
  EXPECT_TRUE(fs::is_fifo(directory_ / "fifo"));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(directory_ / "link.json")));
  EXPECT_FALSE(fs::exists(directory_ / "elsewhere.json"));
}

TEST_F(CommandLine, SlurmScriptsAreRefusedAnythingThatCouldBecomeShellCode) {
  const std::string marker = (directory_ / "injected").string();
  for (const auto& [arguments, named] : std::vector<std::pair<std::string, std::string>>{
           {"slurm --nodes '1;rm -rf /'", "--nodes"},
           {"slurm --nodes '1,$(touch " + marker + ")'", "--nodes"},
           {"slurm --tasks-per-node '2 4'", "--tasks-per-node"},
           {"slurm --partition 'gpu;reboot'", "--partition"},
           {"slurm --account '`touch " + marker + "`'", "--account"},
           {"slurm --time '1:00:00;id'", "--time"},
           {"slurm --model 'x$(touch " + marker + ")'", "dlscale option"},
           {"slurm --batch \"4'\"", "dlscale option"},
           {"slurm --dlscale -x", "--dlscale"},
           {"slurm --partition -x", "--partition"},
           {"slurm --model nonsense", "nonsense"},
           {"slurm --batch 0", "--batch"}}) {
    const auto [status, errors] = run_alone(directory_, arguments + " -o script.sh");
    EXPECT_EQ(status, 2) << arguments;
    EXPECT_NE(errors.find(named), std::string::npos) << arguments << ": " << errors;
    EXPECT_FALSE(fs::exists(directory_ / "script.sh")) << arguments;
  }
  EXPECT_FALSE(fs::exists(marker)) << "a refused value ran as shell code";
}

TEST_F(CommandLine, SlurmQuotesEveryPathItWritesIntoTheScript) {
  const std::string marker = (directory_ / "injected").string();
  const std::string path = "/opt/o'brien/$(touch " + marker + ")/dlscale";
  const auto [status, errors] =
      run_alone(directory_, "slurm --nodes 1 --model fcn:8,4 --dlscale '/opt/o'\\''brien/$(touch " +
                                marker + ")/dlscale' -o s.sh");
  ASSERT_EQ(status, 0) << errors;
  // The settings block, read by bash, gives back the path exactly.
  const std::string read_back = "cd " + directory_.string() +
                                " && bash -c 'eval \"$(sed -n \"/^# --- settings/,/^# --- end/p\" "
                                "s.sh)\"; printf %s \"$DLSCALE\"' > dlscale_path.txt";
  ASSERT_EQ(std::system(read_back.c_str()), 0);
  EXPECT_EQ(dlscale::testing::read_text_file(directory_ / "dlscale_path.txt"), path);
  EXPECT_FALSE(fs::exists(marker)) << "a path ran as shell code";
}

TEST_F(CommandLine, SlurmWritesAStudyScriptWithTheGivenSizes) {
  const auto [status, errors] =
      run_alone(directory_,
                "slurm --nodes 1,2,4,8 --tasks-per-node 4 --cpus-per-task 2 --partition gpu "
                "--model resnet-50 --batch 32 -o study.sh");
  ASSERT_EQ(status, 0) << errors;
  const std::string script = dlscale::testing::read_text_file(directory_ / "study.sh");
  for (const char* line :
       {"NODE_COUNTS='1 2 4 8'", "TASKS_PER_NODE='4'", "CPUS_PER_TASK=2", "PARTITION='gpu'",
        "SHARE_NODES=no", "DLSCALE_OPTIONS=('--model' 'resnet-50' '--batch' '32')"})
    EXPECT_NE(script.find(line), std::string::npos) << line << " missing from:\n" << script;
  const std::string syntax_check = "bash -n " + (directory_ / "study.sh").string();
  EXPECT_EQ(std::system(syntax_check.c_str()), 0);
}

TEST_F(CommandLine, SlurmAsksForWholeNodesUnlessToldToShare) {
  auto [status, errors] = run_alone(directory_, "slurm --nodes 1 --model fcn:8,4 -o whole.sh");
  ASSERT_EQ(status, 0) << errors;
  EXPECT_NE(dlscale::testing::read_text_file(directory_ / "whole.sh").find("SHARE_NODES=no\n"),
            std::string::npos);
  std::tie(status, errors) =
      run_alone(directory_, "slurm --nodes 1 --model fcn:8,4 --share-nodes -o shared.sh");
  ASSERT_EQ(status, 0) << errors;
  EXPECT_NE(dlscale::testing::read_text_file(directory_ / "shared.sh").find("SHARE_NODES=yes\n"),
            std::string::npos);
}

TEST_F(CommandLine, ModelTooLargeForMemoryIsRefusedAtOnce) {
  expect_refused("--model vgg-16 --batch 100000", "available");
}

TEST_F(CommandLine, ListModelsShowsTheReferenceParameterCounts) {
  const Outcome outcome = run_dlscale("--list-models");
  EXPECT_NE(outcome.stdout_text.find("122,194,048"), std::string::npos) << outcome.stdout_text;
  EXPECT_NE(outcome.stdout_text.find("14,205,962"), std::string::npos) << outcome.stdout_text;
}

TEST_F(CommandLine, ListModelsShowsTheGptFamilyWithParametersAndFlopsPerToken) {
  const Outcome outcome = run_dlscale("--list-models");
  const std::string& text = outcome.stdout_text;
  // gpt2-small: 6 (124,439,808 - 786,432) + 12 * 12 * 768 * 1024 FLOPs a token = 0.8552 GFLOP.
  for (const char* expected : {"110,336", "124,439,808", "354,823,168", "GFLOP/token", "0.8552",
                               "gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << " missing:\n" << text;
}

TEST_F(CommandLine, BadGptSpecsAreRefusedOnEveryRank) {
  expect_refused("--model gpt:12,768,5,1024,50257", "not a multiple of 5 heads");
  expect_refused("--model gpt:0,768,12,1024,50257", "outside 1..");
  expect_refused("--model gpt:100000,100000,1,1024,50257", "parameters is more than");
  expect_refused("--model gpt:12,768,12,1024", "exactly 5 sizes");
}

TEST_F(CommandLine, GptTargetLossBelowTheTasksEntropyIsRefused) {
  expect_refused("--model gpt-tiny --target-loss 0.5", "cannot be reached");
}

TEST_F(CommandLine, GptUnderFullShardingIsRefused) {
  expect_refused("--model gpt-tiny --sharding full", "--sharding full cannot train gpt-tiny");
}

}  // namespace
