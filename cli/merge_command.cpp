#include "cli/merge_command.hpp"

#include <chrono>
#include <sstream>
#include <tuple>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "cli/command_setup.hpp"
#include "coordinator/scaling_study.hpp"
#include "coordinator/summary_printer.hpp"
#include "core/errors.hpp"
#include "results/output_file.hpp"
#include "results/reader.hpp"
#include "results/writer.hpp"

namespace dlscale::cli {

namespace {

namespace po = boost::program_options;

struct SourcedRun {
  results::RunRecord run;
  std::string origin;  // "FILE run_NNN", for errors
};

// The settings every run of one study must share, by name, as text.
std::vector<std::pair<std::string, std::string>> study_settings(const results::RunRecord& run) {
  const auto& c = run.configuration;
  std::vector<std::pair<std::string, std::string>> settings = {
      {"model", c.model},
      {"scaling", coordinator::study_scaling(c)},
      {"threads per rank", std::to_string(c.threads_per_rank)},
      {"device", c.device},
      {"comm backend", c.comm_backend},
      {"bucket size (MiB)", fmt::format("{:g}", c.bucket_mb)},
      {"overlap", c.overlap ? "on" : "off"}};
  if (coordinator::study_scaling(c) == "strong")
    settings.emplace_back("global batch", std::to_string(c.batch_per_rank * run.ranks));
  else
    settings.emplace_back("batch per rank", std::to_string(c.batch_per_rank));
  return settings;
}

void check_comparable(const std::vector<SourcedRun>& runs) {
  const auto reference = study_settings(runs.front().run);
  for (const auto& candidate : runs) {
    const auto settings = study_settings(candidate.run);
    for (std::size_t k = 0; k < settings.size(); ++k)
      if (settings[k].second != reference[k].second)
        throw UserError(fmt::format("cannot merge: {} has {} '{}' but {} has '{}'",
                                    candidate.origin, settings[k].first, settings[k].second,
                                    runs.front().origin, reference[k].second));
    const auto point = [](const results::RunRecord& run) {
      return std::tuple(run.ranks, run.configuration.threads_per_rank, run.configuration.repeat);
    };
    for (const auto& other : runs)
      if (&other != &candidate && point(other.run) == point(candidate.run))
        throw UserError(fmt::format(
            "cannot merge: {} and {} are both repeat {} of {} ranks x {} threads; a study keeps "
            "one run per point (use --repeat in one launch to repeat a point)",
            other.origin, candidate.origin, candidate.run.configuration.repeat,
            candidate.run.ranks, candidate.run.configuration.threads_per_rank));
  }
}

std::string help_text(const po::options_description& options) {
  std::ostringstream text;
  text << "dlscale merge: combine the runs of several jobs (say, one job per node count) into one\n"
          "study file that `dlscale report` and `dlscale predict` read. Every run must share the\n"
          "workload and settings (model, scaling mode and batch, threads, device, backend,\n"
          "buckets, overlap) and have a rank count of its own.\n\n"
          "Usage: dlscale merge A.h5 B.h5 ... -o study.h5\n\n"
       << options
       << "\nExample:\n"
          "  dlscale merge nodes-1.h5 nodes-2.h5 nodes-4.h5 -o study.h5 && dlscale report study.h5\n";
  return text.str();
}

}  // namespace

int merge_command(int argc, char** argv) {
  const auto start = std::chrono::system_clock::now();
  std::vector<std::string> inputs;
  std::string output;
  bool overwrite = false;
  po::options_description visible("Options", 100, 50);
  visible.add_options()
      ("help,h", "show this help and exit")
      ("out,o", po::value(&output), "the merged study file (required)")
      ("overwrite", po::bool_switch(&overwrite), "replace an existing file");
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
    if (inputs.empty()) throw UserError("merge needs results files: dlscale merge A.h5 B.h5 -o study.h5");
    if (output.empty()) throw UserError("merge needs --out FILE for the merged study");
    results::check_output_path(output, overwrite);

    std::vector<SourcedRun> runs;
    std::vector<results::FailedPoint> failed_points;
    std::vector<results::NodeSharingProbe> probes;
    for (const auto& input : inputs) {
      const auto file = results::read_results(input);
      if (file.runs.empty()) throw UserError(fmt::format("'{}' holds no training runs", input));
      failed_points.insert(failed_points.end(), file.failed_points.begin(),
                           file.failed_points.end());
      probes.insert(probes.end(), file.node_sharing_probes.begin(),
                    file.node_sharing_probes.end());
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
    check_comparable(runs);

    results::ResultsFile merged;
    merged.origin = file_origin("merge", argc, argv, start);
    for (auto& sourced : runs) merged.runs.push_back(std::move(sourced.run));
    merged.study = coordinator::analyze_study(merged.runs);
    merged.failed_points = std::move(failed_points);
    merged.node_sharing_probes = std::move(probes);
    fmt::print("{}", coordinator::format_study(*merged.study, merged.failed_points));
    results::write_results(merged, output, overwrite);
    fmt::print("merged {} run{} from {} files into {}\n", merged.runs.size(),
               merged.runs.size() == 1 ? "" : "s", inputs.size(), output);
    return 0;
  });
}

}  // namespace dlscale::cli
