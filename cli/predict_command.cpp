// `dlscale predict`: parses the options, reads the study and the network model, and hands them
// to analysis::predict_scaling; printers/prediction_printer formats the result.
#include "cli/predict_command.hpp"

#include "cli/command_setup.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>

#include "analysis/performance_model.hpp"
#include "analysis/scaling_prediction.hpp"
#include "analysis/scaling_study.hpp"
#include "core/errors.hpp"
#include "core/named_records.hpp"
#include "printers/prediction_printer.hpp"
#include "results/comm_reader.hpp"
#include "results/output_file.hpp"
#include "results/reader.hpp"

namespace dlscale::cli {

namespace {

namespace po = boost::program_options;
using analysis::AllreduceAlgorithm;

constexpr int max_ranks = 100000;

// --overlap: the overlap each run measured, or the whole sum hidden behind backward, or none.
enum class OverlapSetting { measured, on, off };
constexpr EnumNames<OverlapSetting, 3> overlap_setting_names{{"measured", "on", "off"}};

constexpr std::string_view standard_output_path = "-";  // --json -

struct PredictOptions {
  std::string path;
  std::string ranks;
  std::string network;
  std::string comm_path;  // alpha and beta fitted by `dlscale comm`, instead of --network
  std::string algorithm = analysis::allreduce_algorithm_names(AllreduceAlgorithm::ring);
  std::string overlap = overlap_setting_names(OverlapSetting::measured);
  std::string json_path;  // "-" for standard output, instead of the table
  std::string hold_out;   // measured rank counts not to predict from
  std::string precision;  // the runs to predict from; empty: each precision of the file in turn
  std::string sharding;   // and the strategy; empty: each strategy of the file in turn
  std::string device;     // the runs to predict from in a merged CPU and GPU study
  bool hold_out_probes = false;
  bool no_calibration = false;
  bool overwrite = false;  // of the --json file
  int ranks_per_node = 0;  // 0: as measured
};

// "2.5e3" followed by a unit from `units` (whitespace around either is allowed): the number
// times the unit's factor, or nothing if the text is not that.
std::optional<double> quantity(std::string_view text, const std::map<std::string, double>& units) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  double number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || !std::isfinite(number) || number < 0) return std::nullopt;
  std::string_view unit(end, std::size_t(text.data() + text.size() - end));
  while (!unit.empty() && is_space(unit.front())) unit.remove_prefix(1);
  const auto factor = units.find(std::string(unit));
  if (factor == units.end()) return std::nullopt;
  const double value = number * factor->second;
  return std::isfinite(value) ? std::optional(value) : std::nullopt;
}

// "100Gbps,2us": a link bandwidth (bits: Gbps, Mbps, Gbit/s; bytes: GB/s, MB/s) and a latency
// (ns, us, ms, s).
analysis::NetworkModel parse_network(const std::string& text) {
  static const std::map<std::string, double> bytes_per_second = {
      {"Gbps", 1e9 / 8},   {"Gbit/s", 1e9 / 8}, {"Mbps", 1e6 / 8},
      {"Mbit/s", 1e6 / 8}, {"GB/s", 1e9},       {"MB/s", 1e6}};
  static const std::map<std::string, double> seconds = {
      {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
  // Longer than any real value: the message must not quote pages of text back.
  const std::size_t longest = 100;
  const auto comma = text.find(',');
  const auto bandwidth = text.size() > longest || comma == std::string::npos
                             ? std::nullopt
                             : quantity(std::string_view(text).substr(0, comma), bytes_per_second);
  const auto latency =
      bandwidth ? quantity(std::string_view(text).substr(comma + 1), seconds) : std::nullopt;
  if (!bandwidth || !latency)
    throw UserError(
        fmt::format("--network '{}': expected BANDWIDTH,LATENCY such as 100Gbps,2us "
                    "(finite numbers; bandwidth in Gbps, Mbps, GB/s or MB/s; latency "
                    "in ns, us, ms or s)",
                    text.size() > longest ? text.substr(0, longest) + "..." : text));
  if (!(*bandwidth > 0))
    throw UserError(fmt::format("--network '{}': the bandwidth must be positive", text));
  return analysis::uniform_network(*latency, 1 / *bandwidth, fmt::format("--network {}", text));
}

analysis::NetworkModel network_from_comm(const std::string& path) {
  const results::CommRecord sweep = results::read_comm(path);
  return analysis::network_of_sweep(sweep, path);
}

// "8,64,512": rank counts from 1 to max_ranks, for `option`.
std::vector<int> parse_counts(const std::string& option, const std::string& text) {
  std::vector<int> ranks;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || n < 1 || n > max_ranks)
      throw UserError(
          fmt::format("{}: '{}' is not a rank count from 1 to {}", option, item, max_ranks));
    ranks.push_back(int(n));
  }
  return ranks;
}

std::vector<int> parse_rank_list(const std::string& text, const std::vector<int>& measured) {
  std::vector<int> ranks = measured;
  if (text.empty()) {
    for (int n = 1; n <= 1024; n *= 2) ranks.push_back(n);
  } else {
    const auto asked = parse_counts("--ranks", text);
    ranks.insert(ranks.end(), asked.begin(), asked.end());
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::string help_text(const po::options_description& options) {
  std::ostringstream text;
  text << "dlscale predict: what would this workload do at scales you cannot try? From a\n"
          "measured run or study (its per-layer backward times, forward and update times, and\n"
          "gradient buckets) and a network model, it predicts the iteration time, efficiency\n"
          "and the gap split (exposed communication, stragglers, other) at any rank count up\n"
          "to 100,000. The allreduce model is alpha-beta: ring 2(N-1)a + 2(N-1)/N m b, or\n"
          "tree 2 log2(N) a + 2 m b, replayed over the buckets in backward order, with a and b\n"
          "by message size and link (intra-node, inter-node) from a `dlscale comm` file.\n"
          "Compute slows as nodes fill, by the runs' node-sharing probes; the wait for\n"
          "stragglers is the expected maximum over N ranks of the measured spread.\n\n"
          "Usage: dlscale predict FILE.h5 (--network BANDWIDTH,LATENCY | --comm COMM.h5) "
          "[options]\n\n"
       << options
       << "\nExamples:\n"
          "  dlscale predict s.h5 --ranks 1024 --network 100Gbps,2us\n"
          "  dlscale predict s.h5 --ranks 8,64,512,4096 --network 25GB/s,5us --algorithm tree\n"
          "  mpirun -np 2 dlscale comm -b 1K -e 64M -f 2 --out c.h5 && dlscale predict s.h5 --comm "
          "c.h5\n"
          "  dlscale predict s.h5 --comm c.h5 --hold-out 4   # 4 from the smaller runs\n\n"
          "Rank counts that were measured are predicted too, beside the measurement, so the\n"
          "model can be judged (with --comm; a --network the runs never ran on is not compared\n"
          "with them). Each rank count measured above the baseline is also predicted without\n"
          "its own runs; the largest miss is the model's error, which widens every row's\n"
       << fmt::format(
              "interval, and a miss above {:.0f}% is warned about. Compute comes from the "
              "measured\nrank count nearest, the mean\n",
              analysis::model_miss_warning * 100)
       << "of all its runs (repeats: the interval holds each alone; the runs are\n"
          "named), slowed as the nodes fill by what the node-sharing probes measured: each\n"
          "sweep point's, and those a launch larger than its sweep runs without training (say\n"
          "`mpirun -np 16 dlscale --ranks 1,2,4` probes 8 and 16 ranks). An efficiency above\n"
          "100% is marked '*' and explained under the table. See docs/scaling-model.md.\n";
  return text.str();
}

}  // namespace

int predict_command(int argc, char** argv) {
  PredictOptions options;
  po::options_description visible("Options", 100, 50);
  // clang-format off
  visible.add_options()("help,h", "show this help and exit")(
      "ranks,r", po::value(&options.ranks),
      "comma-separated rank counts to predict (default: 1, 2, 4, ... 1024); the measured "
      "ones are always added")("network", po::value(&options.network),
                               "link bandwidth and latency, e.g. 100Gbps,2us or 25GB/s,1.5us")(
      "comm", po::value(&options.comm_path),
      "or: alpha and beta as `dlscale comm` fitted them on a real machine (its results file)")(
      "algorithm", po::value(&options.algorithm)->default_value(options.algorithm),
      "allreduce algorithm: ring or tree")(
      "overlap", po::value(&options.overlap)->default_value(options.overlap),
      "bucket sums during backward: on, off, or as measured")(
      "json", po::value(&options.json_path),
      "write the predictions as JSON to FILE ('-': standard output, instead of the table)")(
      "overwrite", po::bool_switch(&options.overwrite),
      "replace an existing --json file (never one of the input files)")(
      "hold-out", po::value(&options.hold_out),
      "measured rank counts not to predict from (their measurements stay beside the "
      "prediction): checks the model on what it did not see")(
      "hold-out-probes", po::bool_switch(&options.hold_out_probes),
      "leave out the held-out runs' node-sharing probes too")(
      "no-calibration", po::bool_switch(&options.no_calibration),
      "use the --comm sweep's allreduce times as they are, not scaled to what a run at the "
      "sweep's rank count measured inside training")(
      "device", po::value(&options.device),
      "predict from the runs on this device, in a study that merged a CPU job and a GPU job "
      "(each device scales on its own; required there)")(
      "precision", po::value(&options.precision),
      "predict from the runs in this precision (default: every precision the file holds, "
      "each from its own runs, one table after another)")(
      "sharding", po::value(&options.sharding),
      "predict the runs of this strategy (none, optimizer, gradients, full; default: every "
      "strategy the file holds, each from its own runs and costed with its own collectives, "
      "then side by side with the rank count where one overtakes another)")(
      "ranks-per-node", po::value(&options.ranks_per_node),
      "ranks on one node at the predicted scales (default: the most any measured run or "
      "node-sharing probe had)");
  // clang-format on
  po::options_description hidden;
  hidden.add_options()("file", po::value(&options.path));
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("file", 1);
  return exit_status_alone([&] {
    const po::variables_map values = parse_command_line(argc, argv, all, positional);
    if (values.count("help")) {
      fmt::print("{}", help_text(visible));
      return 0;
    }
    if (options.path.empty())
      throw UserError("predict needs a results file: dlscale predict FILE.h5 --network ...");
    if (options.network.empty() == options.comm_path.empty())
      throw UserError(
          "predict needs one network model: --network BANDWIDTH,LATENCY (such as "
          "100Gbps,2us) or --comm FILE from `dlscale comm`");
    const AllreduceAlgorithm algorithm = enum_named(analysis::allreduce_algorithm_names,
                                                    options.algorithm, "--algorithm", "algorithm");
    const OverlapSetting overlap =
        enum_named(overlap_setting_names, options.overlap, "--overlap", "setting");
    // As every results file: an existing one is replaced only with --overwrite, an input never.
    if (!options.json_path.empty() && options.json_path != standard_output_path) {
      results::check_output_path(options.json_path, options.overwrite, "--json");
      results::check_output_is_not_an_input(options.json_path, {options.path, options.comm_path},
                                            "--json");
    }
    const analysis::NetworkModel network = options.network.empty()
                                               ? network_from_comm(options.comm_path)
                                               : parse_network(options.network);
    if (values.count("ranks-per-node") && options.ranks_per_node < 1)
      throw UserError("--ranks-per-node: must be 1 or more");
    analysis::PredictionSettings settings;
    settings.algorithm = algorithm;
    if (overlap != OverlapSetting::measured) settings.overlap = overlap == OverlapSetting::on;
    settings.ranks_per_node = options.ranks_per_node;
    if (!options.hold_out.empty()) settings.held_out = parse_counts("--hold-out", options.hold_out);
    settings.hold_out_probes = options.hold_out_probes;
    settings.calibrate_communication = !options.no_calibration;
    // A --comm sweep measures the network the runs ran on (or one the user holds to be it); a
    // --network is one they never ran on, so their measurements cannot check it.
    settings.network_describes_runs = options.network.empty();

    results::ResultsFile file = results::read_results(options.path);
    if (file.runs.empty())
      throw UserError(fmt::format("'{}' holds no training runs to predict from", options.path));
    // A merged CPU and GPU study: one device's runs are one scaling study; mixed, they are not.
    const std::vector<std::string> devices = analysis::devices_in_run_order(file.runs);
    if (!options.device.empty()) {
      require_choice("--device", "device of this file", options.device, devices);
      std::erase_if(file.runs, [&](const results::RunRecord& run) {
        return run.configuration.device != options.device;
      });
    } else if (devices.size() > 1) {
      throw UserError(fmt::format("'{}' holds runs on {}; name the one to predict with --device",
                                  options.path, fmt::join(devices, " and ")));
    }
    for (const auto& run : file.runs)
      if (run.layers.empty())
        throw UserError(
            fmt::format("'{}' was written before per-layer times were recorded "
                        "(schema 1); rerun the benchmark to predict from it",
                        options.path));
    std::vector<int> measured_ranks;
    for (const auto& run : file.runs) measured_ranks.push_back(run.ranks);
    const std::vector<int> ranks = parse_rank_list(options.ranks, measured_ranks);
    std::vector<std::string> precisions = analysis::precisions_in_run_order(file.runs);
    if (!options.precision.empty()) {
      require_choice("--precision", "precision of this file", options.precision, precisions);
      precisions = {options.precision};
    }
    std::vector<std::string> shardings = analysis::shardings_in_run_order(file.runs);
    if (!options.sharding.empty()) {
      require_choice("--sharding", "strategy of this file", options.sharding, shardings);
      shardings = {options.sharding};
    }
    if (!options.json_path.empty() && precisions.size() > 1)
      throw UserError(
          fmt::format("--json: '{}' holds runs in {}; name the one to predict with --precision",
                      options.path, fmt::join(precisions, " and ")));
    if (!options.json_path.empty() && shardings.size() > 1)
      throw UserError(
          fmt::format("--json: '{}' holds runs with --sharding {}; name the one to predict with "
                      "--sharding",
                      options.path, fmt::join(shardings, " and ")));
    bool first_table = true;
    for (const std::string& precision : precisions) {
      settings.precision = precision;
      std::vector<analysis::ScalingPrediction> strategies;
      for (const std::string& sharding : shardings) {
        settings.sharding = *results::sharding_names.named(sharding);
        const bool measured = std::any_of(file.runs.begin(), file.runs.end(), [&](const auto& run) {
          return run.configuration.precision == precision &&
                 run.configuration.sharding == *settings.sharding;
        });
        if (!measured) continue;
        const auto prediction = analysis::predict_scaling(file.runs, file.node_sharing_probes,
                                                          network, ranks, settings);
        if (!options.json_path.empty()) {
          const std::string json =
              printers::format_prediction_json(prediction, network, options.algorithm);
          if (options.json_path == standard_output_path) {
            fmt::print("{}", json);
            return 0;
          }
          results::write_text_atomically(options.json_path, json, options.overwrite);
        }
        if (!first_table) fmt::print("\n");
        first_table = false;
        fmt::print("{}", printers::format_prediction_table(prediction, network, options.algorithm));
        strategies.push_back(prediction);
      }
      if (strategies.size() > 1)
        fmt::print("\n{}", printers::format_strategy_comparison(strategies));
    }
    return 0;
  });
}

}  // namespace dlscale::cli
