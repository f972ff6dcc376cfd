#include "cli/merge_command.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "analysis/scaling_study.hpp"
#include "cli/command_setup.hpp"
#include "core/errors.hpp"
#include "printers/summary_printer.hpp"
#include "results/output_file.hpp"
#include "results/reader.hpp"
#include "results/run_record.hpp"
#include "results/writer.hpp"

namespace dlscale::cli {

namespace {

namespace po = boost::program_options;

struct SourcedRun {
  results::RunRecord run;
  std::string origin;  // "FILE run_NNN", for errors
};

// A failed point of an input, with the launch settings its file recorded (none before schema 8).
struct SourcedFailedPoint {
  results::FailedPoint point;
  std::optional<results::RunConfiguration> settings;
  results::FileOrigin file_origin;  // its launch's: the same point given twice has the same
  std::string origin;               // "FILE failed point K", for errors
};

using Settings = std::vector<std::pair<std::string, std::string>>;

// The settings every point of one study must share, by name, as text: everything that defines a
// point besides its rank count, device, precision and sharding, from `c` and a point of `ranks`
// ranks: the workload, the batch and the training settings. Precisions and strategies may differ,
// and so may devices (a CPU job and a GPU job of one workload): the study measures each against
// its own baseline, as it does in a launch with --precision fp32,bf16 or --sharding none,optimizer.
// device_settings says what one device's runs share.
Settings study_settings(const results::RunConfiguration& c, int ranks) {
  Settings settings = {
      {"model", c.model},
      {"scaling", analysis::study_scaling(c)},
      {"bucket size (MiB)", fmt::format("{:g}", c.bucket_mb)},
      {"overlap", c.overlap ? "on" : "off"},
      {"optimizer", results::optimizer_names(c.optimizer)},
      {"learning-rate scaling", results::learning_rate_scaling_names(c.learning_rate_scaling)},
      {"base learning rate", fmt::format("{:g}", c.base_learning_rate)},
      {"learning-rate warm-up steps", std::to_string(c.learning_rate_warmup_steps)},
      {"evaluation interval", std::to_string(c.evaluate_every)},
      {"target", c.target ? fmt::format("{} {:g}", c.target->metric_name(), c.target->value)
                          : std::string("none")}};
  if (results::scaling_names.named(analysis::study_scaling(c)) == results::Scaling::strong)
    settings.emplace_back("global batch", std::to_string((long long)c.batch_per_rank * ranks));
  else
    settings.emplace_back("batch per rank", std::to_string(c.batch_per_rank));
  return settings;
}

// What the runs of one device share: how it computed and summed (a GPU study runs one thread
// per rank and sums with NCCL where the CPU's runs several and sums with MPI).
Settings device_settings(const results::RunConfiguration& c) {
  return {{"threads per rank", std::to_string(c.threads_per_rank)},
          {"comm backend", c.comm_backend},
          {"gradient dtype", c.gradient_dtype}};
}

// A failed point's configuration: its file's launch settings with the point's own threads and
// batch.
results::RunConfiguration configuration_of(const SourcedFailedPoint& failed) {
  results::RunConfiguration c = *failed.settings;
  c.threads_per_rank = failed.point.threads;
  c.batch_per_rank = failed.point.batch_per_rank;
  return c;
}

void require_same_settings(const Settings& settings, const std::string& origin,
                           const Settings& reference, const std::string& reference_origin) {
  for (std::size_t k = 0; k < settings.size(); ++k)
    if (settings[k].second != reference[k].second)
      throw UserError(fmt::format("cannot merge: {} has {} '{}' but {} has '{}'", origin,
                                  settings[k].first, settings[k].second, reference_origin,
                                  reference[k].second));
}

void check_comparable(const std::vector<SourcedRun>& runs,
                      const std::vector<SourcedFailedPoint>& failed_points) {
  const auto& first = runs.front();
  const auto reference = study_settings(first.run.configuration, first.run.ranks);
  // Each device's first run sets what that device's other runs must share.
  std::map<std::string, std::pair<Settings, std::string>> device_reference;
  const auto require_same_device_settings = [&](const results::RunConfiguration& c,
                                                const std::string& origin) {
    const auto [known, added] = device_reference.try_emplace(c.device, device_settings(c), origin);
    if (!added)
      require_same_settings(device_settings(c), origin, known->second.first, known->second.second);
  };
  for (const auto& candidate : runs) {
    require_same_settings(study_settings(candidate.run.configuration, candidate.run.ranks),
                          candidate.origin, reference, first.origin);
    require_same_device_settings(candidate.run.configuration, candidate.origin);
  }
  // A failed point from a file before schema 8 names no settings beyond its row: it is taken as
  // it is, as merge always took it.
  for (const auto& failed : failed_points)
    if (failed.settings) {
      const results::RunConfiguration c = configuration_of(failed);
      require_same_settings(study_settings(c, failed.point.ranks), failed.origin, reference,
                            first.origin);
      require_same_device_settings(c, failed.origin);
    }
}

// The same failed point given twice (one file named twice) would be listed twice.
void refuse_failed_points_given_twice(const std::vector<SourcedFailedPoint>& failed_points) {
  const auto identity = [](const SourcedFailedPoint& failed) {
    return std::tie(failed.file_origin.start_time_utc, failed.file_origin.command_line,
                    failed.point.ranks, failed.point.precision, failed.point.sharding,
                    failed.point.threads, failed.point.repeat, failed.point.seed,
                    failed.point.reason);
  };
  std::map<decltype(identity(failed_points.front())), const SourcedFailedPoint*> seen;
  for (const auto& candidate : failed_points) {
    const auto [first, inserted] = seen.emplace(identity(candidate), &candidate);
    if (!inserted)
      throw UserError(fmt::format("cannot merge: {} and {} are the same failed point, given twice",
                                  first->second->origin, candidate.origin));
  }
}

// The same run given twice (one file named twice, or a merged study with one of its inputs)
// would count one measurement as two repeats. Not by its repeat number, which a merge renumbers:
// repeats of one launch differ in seed.
void refuse_runs_given_twice(const std::vector<SourcedRun>& runs) {
  const auto identity = [](const results::RunRecord& run) {
    return std::tie(run.environment.start_time_utc, run.environment.command_line,
                    run.environment.rank_hosts, run.environment.slurm.job_id, run.ranks,
                    run.configuration.device, run.configuration.precision,
                    run.configuration.threads_per_rank, run.configuration.seed);
  };
  std::map<decltype(identity(runs.front().run)), const SourcedRun*> seen;
  for (const auto& candidate : runs) {
    const auto [first, inserted] = seen.emplace(identity(candidate.run), &candidate);
    if (!inserted)
      throw UserError(fmt::format("cannot merge: {} and {} are the same run, given twice",
                                  first->second->origin, candidate.origin));
  }
}

// Points measured by several jobs (each job of a `--ranks all` node study measures 1, 2, ...
// ranks; a resubmitted job measures its point again) are repeats: numbered 0, 1, ... per
// (device, precision, threads, ranks) in input order, so the study's spread over repeats covers
// them. Each run keeps its own record of where it ran (Slurm job, nodes, hosts).
void number_repeats(std::vector<results::RunRecord>& runs) {
  std::map<std::tuple<std::string, std::string, int, int>, int> repeats_so_far;
  for (auto& run : runs)
    run.configuration.repeat =
        repeats_so_far[{run.configuration.device, run.configuration.precision,
                        run.configuration.threads_per_rank, run.ranks}]++;
}

// A Slurm job of the study that left no results file, as the merge job names it:
// "JOB:RANKS:STATE", e.g. "4242:8:CANCELLED, exit code 0:15".
struct MissingJob {
  std::string job_id;
  int ranks = 0;
  std::string state;
};

MissingJob parse_missing_job(const std::string& text) {
  const auto first = text.find(':');
  const auto second = first == std::string::npos ? first : text.find(':', first + 1);
  MissingJob job;
  if (second != std::string::npos) {
    job.job_id = text.substr(0, first);
    job.state = text.substr(second + 1);
    const auto count = text.substr(first + 1, second - first - 1);
    const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), job.ranks);
    if (error != std::errc() || end != count.data() + count.size()) job.ranks = 0;
  }
  const bool job_id_ok = !job.job_id.empty() && job.job_id.size() <= 32 &&
                         job.job_id.find_first_not_of("0123456789_") == std::string::npos;
  const bool state_ok = !job.state.empty() && job.state.size() <= 200 &&
                        std::none_of(job.state.begin(), job.state.end(), [](char c) {
                          return std::iscntrl(static_cast<unsigned char>(c)) != 0;
                        });
  if (!job_id_ok || job.ranks < 1 || !state_ok)
    throw UserError(
        fmt::format("--missing-job '{}' is not JOB:RANKS:STATE, e.g. "
                    "'4242:8:CANCELLED, exit code 0:15'",
                    text.substr(0, 80)));
  return job;
}

// A missing job's point, kept as a failed point of the study, so the report lists it with why.
results::FailedPoint failed_point_of(const MissingJob& job, const results::RunRecord& measured) {
  results::FailedPoint point;
  point.ranks = job.ranks;
  point.precision = measured.configuration.precision;
  point.sharding = results::sharding_names(measured.configuration.sharding);
  point.threads = measured.configuration.threads_per_rank;
  point.batch_per_rank =
      results::scaling_names.named(analysis::study_scaling(measured.configuration)) ==
              results::Scaling::strong
          ? measured.configuration.batch_per_rank * measured.ranks / job.ranks
          : measured.configuration.batch_per_rank;
  point.cause = FailureCause::job_left_no_results;
  point.reason = fmt::format("Slurm job {} left no results file ({})", job.job_id, job.state);
  return point;
}

std::string help_text(const po::options_description& options) {
  std::ostringstream text;
  text << "dlscale merge: combine the runs of several jobs (say, one job per node count) into one\n"
          "study file that `dlscale report` and `dlscale predict` read. Every run must share the\n"
          "workload and settings (model, scaling mode and batch, buckets, overlap, learning-rate\n"
          "rule, evaluation interval, target), failed points too. Precisions and devices may\n"
          "differ, each measured against its own baseline (an fp32 job and a bf16 job, or a CPU\n"
          "job and a GPU job, make one study; the report puts the devices side by side); the\n"
          "runs of one device must share threads, backend and gradient dtype. Points measured by\n"
          "several inputs (the\n"
          "1-rank point of every job of a `--ranks all` node study, a resubmitted job) are kept\n"
          "as repeats of the point, numbered in input order, each with its own job, nodes and\n"
          "hosts; the study shows their spread. The same run or failed point given twice is\n"
          "refused, and so is a `dlscale comm` file. An input\n"
          "whose every point failed adds its failed points; one with nothing in it (a job\n"
          "stopped before its first point ended) is left out with a line, as partial runs are.\n\n"
          "Usage: dlscale merge A.h5 B.h5 ... -o study.h5\n\n"
       << options
       << "\nExample:\n"
          "  dlscale merge nodes-1.h5 nodes-2.h5 nodes-4.h5 -o study.h5 && dlscale report "
          "study.h5\n";
  return text.str();
}

}  // namespace

int merge_command(int argc, char** argv) {
  const auto start = std::chrono::system_clock::now();
  std::vector<std::string> inputs;
  std::string output;
  bool overwrite = false;
  std::vector<std::string> missing_jobs;
  po::options_description visible("Options", 100, 50);
  // clang-format off
  visible.add_options()("help,h", "show this help and exit")("out,o", po::value(&output),
                                                             "the merged study file (required)")(
      "overwrite", po::bool_switch(&overwrite),
      "replace an existing file (never one of the inputs)")(
      "missing-job", po::value(&missing_jobs),
      "JOB:RANKS:STATE, repeatable: a Slurm job of the study that left no results file, kept "
      "as a failed point with its state (the node-study script's merge job passes these)");
  // clang-format on
  po::options_description hidden;
  hidden.add_options()("input", po::value(&inputs));
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("input", -1);
  return exit_status_alone([&] {
    const po::variables_map values = parse_command_line(argc, argv, all, positional);
    if (values.count("help")) {
      fmt::print("{}", help_text(visible));
      return 0;
    }
    if (inputs.empty())
      throw UserError("merge needs results files: dlscale merge A.h5 B.h5 -o study.h5");
    if (output.empty()) throw UserError("merge needs --out FILE for the merged study");
    results::check_output_path(output, overwrite);
    // Even with --overwrite: a study written over one of its inputs loses that input for good.
    results::check_output_is_not_an_input(output, {inputs.begin(), inputs.end()}, "--out");

    std::vector<SourcedRun> runs;
    std::vector<SourcedFailedPoint> sourced_failed_points;
    std::vector<results::NodeSharingProbe> probes;
    for (const auto& input : inputs) {
      const auto file = results::read_results(input);
      // A job whose every point failed still tells the study why. One stopped before its first
      // point ended (status running or interrupted) has nothing to add; the others still merge.
      if (file.runs.empty() && file.failed_points.empty()) {
        fmt::print("leaving out {}: it holds no runs and no failed points (status {})\n", input,
                   file.status);
        continue;
      }
      for (std::size_t k = 0; k < file.failed_points.size(); ++k)
        sourced_failed_points.push_back({file.failed_points[k], file.failed_points_configuration,
                                         file.origin, fmt::format("{} failed point {}", input, k)});
      probes.insert(probes.end(), file.node_sharing_probes.begin(), file.node_sharing_probes.end());
      for (std::size_t index = 0; index < file.runs.size(); ++index) {
        const std::string name = fmt::format("{} {}", input, results::run_group_name(index));
        // A study compares whole runs; one cut short stays in its own file.
        if (!file.runs[index].partial_reason.empty()) {
          fmt::print("leaving out {}: partial, {}\n", name, file.runs[index].partial_reason);
          continue;
        }
        runs.push_back({file.runs[index], name});
      }
    }
    if (runs.empty()) throw UserError("the inputs hold no complete training runs to merge");
    check_comparable(runs, sourced_failed_points);
    refuse_runs_given_twice(runs);
    if (!sourced_failed_points.empty()) refuse_failed_points_given_twice(sourced_failed_points);
    std::vector<results::FailedPoint> failed_points;
    for (auto& sourced : sourced_failed_points) failed_points.push_back(std::move(sourced.point));
    for (const auto& text : missing_jobs)
      failed_points.push_back(failed_point_of(parse_missing_job(text), runs.front().run));

    results::ResultsFile merged;
    merged.origin = file_origin("merge", argc, argv, start);
    for (auto& sourced : runs) merged.runs.push_back(std::move(sourced.run));
    number_repeats(merged.runs);
    merged.study = analysis::analyze_study(merged.runs);
    merged.failed_points = std::move(failed_points);
    // The launch settings every point now shares, checked above: the first run's.
    if (!merged.failed_points.empty())
      merged.failed_points_configuration = merged.runs.front().configuration;
    merged.node_sharing_probes = std::move(probes);
    fmt::print("{}", printers::format_study(*merged.study, merged.failed_points));
    results::write_results(merged, output, overwrite);
    fmt::print("merged {} run{} from {} file{} into {}\n", merged.runs.size(),
               merged.runs.size() == 1 ? "" : "s", inputs.size(), inputs.size() == 1 ? "" : "s",
               output);
    return 0;
  });
}

}  // namespace dlscale::cli
