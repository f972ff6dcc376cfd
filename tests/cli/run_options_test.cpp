// Option parsing: defaults, range checks, the config file, and one-line errors naming the option.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include "cli/run_options.hpp"

#include "core/errors.hpp"

namespace dlscale::cli {
namespace {

std::string error_of(const std::vector<std::string>& arguments) {
  try {
    parse_run_options(arguments);
  } catch (const UserError& error) {
    return error.what();
  }
  return "no error";
}

TEST(RunOptions, DefaultsTrainFcnRWithTheWorkloadBatch) {
  const RunOptions options = parse_run_options({});
  EXPECT_EQ(options.action, RunOptions::Action::train);
  EXPECT_EQ(options.model, "fcn-r");
  EXPECT_FALSE(options.batch.has_value());
  EXPECT_EQ(options.threads, std::vector<int>{1});
}

TEST(RunOptions, ReadsLongAndShortOptions) {
  const RunOptions options = parse_run_options(
      {"--model", "fcn-s", "-b", "32", "--iters=7", "--warmup", "0", "-o", "x.h5"});
  EXPECT_EQ(options.model, "fcn-s");
  EXPECT_EQ(options.batch, 32);
  EXPECT_EQ(options.measured_iterations, 7);
  EXPECT_EQ(options.warmup_iterations, 0);
  EXPECT_EQ(options.output_path, "x.h5");
}

TEST(RunOptions, ZeroAndNegativeNumbersNameTheOption) {
  EXPECT_EQ(error_of({"--batch", "0"}), "--batch must be a positive integer, got 0");
  EXPECT_EQ(error_of({"--batch", "-3"}), "--batch must be a positive integer, got -3");
  EXPECT_EQ(error_of({"--iters", "0"}), "--iters must be a positive integer, got 0");
  EXPECT_EQ(error_of({"--threads", "-1"}),
            "--threads: '-1' is not a thread count in 1..1024 (expected a list such as 1,2,4)");
  EXPECT_EQ(error_of({"--warmup", "-1"}), "--warmup must be zero or a positive integer, got -1");
  EXPECT_NE(error_of({"--lr", "0"}).find("--lr"), std::string::npos);
}

TEST(RunOptions, ThreadListsRepeatsSamplingAndTimeoutAreRead) {
  const auto options = parse_run_options({"--threads", "4,1,2,2", "--repeat", "3",
                                          "--sample-interval", "0.1", "--point-timeout", "60"});
  EXPECT_EQ(options.threads, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(options.repeats, 3);
  EXPECT_EQ(options.sample_interval_seconds, 0.1);
  EXPECT_EQ(options.point_timeout_seconds, 60);
  EXPECT_EQ(parse_run_options({"--sample-interval", "0"}).sample_interval_seconds, 0);
}

TEST(RunOptions, BadThreadListsRepeatsAndIntervalsNameTheOption) {
  EXPECT_NE(error_of({"--threads", "1,,2"}).find("--threads: ''"), std::string::npos);
  EXPECT_NE(error_of({"--threads", "2000"}).find("1..1024"), std::string::npos);
  EXPECT_EQ(error_of({"--repeat", "0"}), "--repeat must be a positive integer, got 0");
  EXPECT_NE(error_of({"--repeat", "1000"}).find("at most 100"), std::string::npos);
  EXPECT_NE(error_of({"--sample-interval", "0.001"}).find("--sample-interval"), std::string::npos);
  EXPECT_NE(error_of({"--sample-interval", "-1"}).find("--sample-interval"), std::string::npos);
  EXPECT_NE(error_of({"--point-timeout", "-5"}).find("--point-timeout"), std::string::npos);
}

TEST(RunOptions, TheNodeSharingProbeRunsUnlessProbeNo) {
  EXPECT_TRUE(parse_run_options({}).probe_node_sharing);
  EXPECT_FALSE(parse_run_options({"--probe", "no"}).probe_node_sharing);
  EXPECT_EQ(error_of({"--probe", "maybe"}), "--probe must be yes or no, got 'maybe'");
}

TEST(RunOptions, TheGemmYardstickRunsUnlessNoYardstick) {
  EXPECT_TRUE(parse_run_options({}).gemm_yardstick);
  EXPECT_FALSE(parse_run_options({"--no-yardstick"}).gemm_yardstick);
}

TEST(RunOptions, ATargetEvaluatesEveryTenStepsAndLimitsSamplesNotIterations) {
  const auto options = parse_run_options({"--target-accuracy", "0.8", "--lr-scaling", "linear",
                                          "--warmup-steps", "5", "--max-samples", "1000"});
  ASSERT_TRUE(options.target.has_value());
  EXPECT_EQ(options.target->metric, results::TargetMetric::accuracy);
  EXPECT_EQ(options.target->value, 0.8);
  EXPECT_EQ(options.evaluate_every, 10);
  EXPECT_EQ(options.max_samples, 1000);
  EXPECT_EQ(options.learning_rate_scaling, results::LearningRateScaling::linear);
  EXPECT_EQ(options.learning_rate_warmup_steps, 5);
  EXPECT_EQ(parse_run_options({"--target-loss", "0.5", "--eval-every", "3"}).evaluate_every, 3);
  EXPECT_FALSE(parse_run_options({"--eval-every", "4"}).target.has_value());
  EXPECT_EQ(parse_run_options({}).evaluate_every, 0);
}

TEST(RunOptions, BadTargetsAndLearningRateRulesNameTheOption) {
  EXPECT_EQ(error_of({"--target-accuracy", "1.5"}), "--target-accuracy must be in (0, 1], got 1.5");
  EXPECT_EQ(error_of({"--target-accuracy", "0.8", "--target-loss", "1"}),
            "--target-accuracy and --target-loss: give one target");
  EXPECT_NE(error_of({"--target-loss", "-1"}).find("--target-loss"), std::string::npos);
  EXPECT_NE(error_of({"--target-accuracy", "0.8", "--eval-every", "0"}).find("--eval-every"),
            std::string::npos);
  EXPECT_NE(error_of({"--target-accuracy", "0.8", "--iters", "50"}).find("leave out --iters"),
            std::string::npos);
  EXPECT_NE(error_of({"--max-samples", "100"}).find("--max-samples limits"), std::string::npos);
  EXPECT_NE(error_of({"--eval-samples", "0"}).find("--eval-samples"), std::string::npos);
  EXPECT_NE(error_of({"--lr-scaling", "cubic"}).find("--lr-scaling"), std::string::npos);
  EXPECT_NE(error_of({"--optimizer", "adam"}).find("--optimizer: unknown optimizer 'adam'"),
            std::string::npos);
  EXPECT_EQ(parse_run_options({"--optimizer", "adamw"}).optimizer, results::OptimizerKind::adamw);
  EXPECT_EQ(parse_run_options({}).optimizer, results::OptimizerKind::sgd);
  EXPECT_NE(error_of({"--warmup-steps", "10"}).find("--lr-scaling linear or sqrt"),
            std::string::npos);
}

TEST(RunOptions, NonNumbersAndUnknownOptionsAreOneLineErrors) {
  const std::string not_a_number = error_of({"--batch", "many"});
  EXPECT_NE(not_a_number.find("--batch"), std::string::npos) << not_a_number;
  const std::string unknown = error_of({"--frobnicate"});
  EXPECT_NE(unknown.find("--frobnicate"), std::string::npos) << unknown;
  EXPECT_EQ(unknown.find('\n'), std::string::npos);
}

TEST(RunOptions, AnUnknownOptionSuggestsTheNearestOne) {
  EXPECT_EQ(error_of({"--iterations", "3"}),
            "unrecognised option '--iterations' (did you mean '--iters'?)");
  EXPECT_EQ(error_of({"--bacth", "3"}), "unrecognised option '--bacth' (did you mean '--batch'?)");
  EXPECT_EQ(error_of({"--frobnicate"}).find("did you mean"), std::string::npos);
}

TEST(RunOptions, AnEmptyRankListIsRefusedAsAnEmptyThreadListIs) {
  EXPECT_EQ(error_of({"--ranks", ""}),
            "--ranks must not be empty: give rank counts such as 1,2,4, or all");
  EXPECT_NE(error_of({"--threads", ""}), "no error");
}

TEST(RunOptions, ConfigFileSetsKeysAndTheCommandLineWins) {
  const auto path = std::filesystem::temp_directory_path() / "dlscale_run_options_test.cfg";
  std::ofstream(path) << "model = fcn-s\nbatch = 16\niters = 4\n";
  const RunOptions options = parse_run_options({"--config", path.string(), "--batch", "8"});
  std::filesystem::remove(path);
  EXPECT_EQ(options.model, "fcn-s");
  EXPECT_EQ(options.measured_iterations, 4);
  EXPECT_EQ(options.batch, 8);
}

TEST(RunOptions, MissingOrBadConfigFileNamesIt) {
  EXPECT_EQ(error_of({"--config", "/nonexistent/dlscale.cfg"}),
            "--config: cannot read '/nonexistent/dlscale.cfg'");
  const auto path = std::filesystem::temp_directory_path() / "dlscale_bad_config_test.cfg";
  std::ofstream(path) << "colour = blue\n";
  const std::string error = error_of({"--config", path.string()});
  EXPECT_NE(error.find("colour"), std::string::npos) << error;
  std::ofstream(path) << "# a study\nmodel = fcn-s\n\niterations = 4\n";
  EXPECT_EQ(error_of({"--config", path.string()}),
            fmt::format("--config {} line 4: unrecognised option 'iterations' (did you mean "
                        "'--iters'?)",
                        path.string()));
  std::filesystem::remove(path);
}

TEST(RunOptions, HelpListsEveryOptionGroup) {
  const std::string help = run_help_text();
  for (const char* option :
       {"--model", "--batch", "--iters", "--warmup", "--threads", "--comm", "--device", "--seed",
        "--out", "--overwrite", "--config", "--list-models", "--version"})
    EXPECT_NE(help.find(option), std::string::npos) << option;
}

TEST(RunOptions, HelpShowsFractionalDefaultsAsTyped) {
  const std::string help = run_help_text();
  EXPECT_NE(help.find("--sample-interval arg (=0.2)"), std::string::npos) << help;
  EXPECT_NE(help.find("--lr arg (=0.01)"), std::string::npos) << help;
  EXPECT_EQ(help.find("0000000"), std::string::npos) << help;
}

std::string sweep_error(const std::vector<std::string>& arguments, int world_size) {
  try {
    const RunOptions options = parse_run_options(arguments);
    batches_per_rank(options, sweep_rank_counts(options, world_size), 64);
  } catch (const UserError& error) {
    return error.what();
  }
  return "no error";
}

TEST(RankSweep, ListsAreSortedAndAllMeansPowersOfTwoAndTheLaunch) {
  EXPECT_EQ(sweep_rank_counts(parse_run_options({}), 4), std::vector<int>{4});
  EXPECT_EQ(sweep_rank_counts(parse_run_options({"--ranks", "4,1,2,2"}), 4),
            (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(sweep_rank_counts(parse_run_options({"--ranks", "all"}), 8),
            (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(sweep_rank_counts(parse_run_options({"--ranks", "all"}), 6),
            (std::vector<int>{1, 2, 4, 6}));
}

TEST(RankSweep, BadListsAndTooManyRanksAreRefused) {
  EXPECT_NE(sweep_error({"--ranks", "1,x"}, 4).find("'x'"), std::string::npos);
  EXPECT_NE(sweep_error({"--ranks", "0,2"}, 4).find("'0'"), std::string::npos);
  EXPECT_NE(sweep_error({"--ranks", "1,2,"}, 4).find("--ranks"), std::string::npos);
  EXPECT_NE(sweep_error({"--ranks", "1,8"}, 4).find("only 4"), std::string::npos);
}

TEST(RankSweep, WeakKeepsTheBatchAndStrongSplitsTheGlobalBatch) {
  const auto weak = parse_run_options({"--ranks", "1,2,4", "--batch", "32"});
  EXPECT_EQ(batches_per_rank(weak, {1, 2, 4}, 64), (std::vector<int>{32, 32, 32}));
  EXPECT_EQ(recorded_scaling(weak), dlscale::results::Scaling::weak);
  const auto strong = parse_run_options({"--ranks", "1,2,4", "--global-batch", "256"});
  EXPECT_EQ(strong.scaling, "strong");
  EXPECT_EQ(batches_per_rank(strong, {1, 2, 4}, 64), (std::vector<int>{256, 128, 64}));
  EXPECT_EQ(recorded_scaling(parse_run_options({})), dlscale::results::Scaling::none);
}

TEST(RankSweep, StrongScalingMistakesAreNamed) {
  EXPECT_NE(sweep_error({"--ranks", "1,2,3", "--global-batch", "256"}, 4).find("over 3 ranks"),
            std::string::npos);
  EXPECT_NE(sweep_error({"--scaling", "strong"}, 4).find("--global-batch"), std::string::npos);
  EXPECT_NE(sweep_error({"--global-batch", "8", "--batch", "4"}, 4).find("--batch"),
            std::string::npos);
  EXPECT_NE(sweep_error({"--scaling", "weak", "--global-batch", "8"}, 4).find("strong"),
            std::string::npos);
  EXPECT_NE(sweep_error({"--scaling", "linear"}, 4).find("linear"), std::string::npos);
}

TEST(GradientOptions, BucketsDefaultTo25MiBOverlappedAndNegativeIsRefused) {
  const RunOptions defaults = parse_run_options({});
  EXPECT_EQ(defaults.bucket_mb, 25);
  EXPECT_TRUE(defaults.overlap);
  EXPECT_FALSE(parse_run_options({"--no-overlap"}).overlap);
  EXPECT_NE(error_of({"--bucket-mb", "-1"}).find("--bucket-mb"), std::string::npos);
}

}  // namespace
}  // namespace dlscale::cli
