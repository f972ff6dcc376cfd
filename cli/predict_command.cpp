#include "cli/predict_command.hpp"

#include "cli/command_setup.hpp"

#include <cmath>
#include <map>
#include <regex>
#include <sstream>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "coordinator/performance_model.hpp"
#include "coordinator/scaling_study.hpp"
#include "core/errors.hpp"
#include "results/comm_reader.hpp"
#include "results/output_file.hpp"
#include "results/reader.hpp"

namespace dlscale::cli {

namespace {

namespace po = boost::program_options;
using coordinator::AllreduceAlgorithm;

constexpr int max_ranks = 100000;

struct PredictOptions {
  std::string path;
  std::string ranks;
  std::string network;
  std::string comm_path;  // alpha and beta fitted by `dlscale comm`, instead of --network
  std::string algorithm = "ring";
  std::string overlap = "measured";
  std::string json_path;  // "-" for standard output, instead of the table
};

struct PredictedRow {
  int ranks = 0;
  double iteration_seconds = 0, efficiency = 0, speedup = 0;
  double gap_communication = 0, gap_load_imbalance = 0, gap_other = 0;
  double measured_iteration_seconds = 0;  // 0: not measured
};

// Numbers as JSON allows them: NaN and infinities become null.
std::string json_number(double value) {
  return std::isfinite(value) ? fmt::format("{:.9g}", value) : "null";
}

std::string predictions_json(const std::string& model, const coordinator::NetworkModel& network,
                             const std::string& algorithm, const std::vector<PredictedRow>& rows) {
  std::string out = fmt::format(
      "{{\"model\": \"{}\", \"algorithm\": \"{}\", \"alpha_seconds\": {}, "
      "\"beta_seconds_per_byte\": {}, \"predictions\": [",
      model, algorithm, json_number(network.alpha_seconds), json_number(network.beta_seconds_per_byte));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out += fmt::format(
        "{}\n  {{\"ranks\": {}, \"iteration_seconds\": {}, \"efficiency\": {}, \"speedup\": {}, "
        "\"gap_communication\": {}, \"gap_load_imbalance\": {}, \"gap_other\": {}, "
        "\"measured_iteration_seconds\": {}}}",
        i == 0 ? "" : ",", r.ranks, json_number(r.iteration_seconds), json_number(r.efficiency),
        json_number(r.speedup), json_number(r.gap_communication),
        json_number(r.gap_load_imbalance), json_number(r.gap_other),
        r.measured_iteration_seconds > 0 ? json_number(r.measured_iteration_seconds) : "null");
  }
  return out + "\n]}\n";
}

// "100Gbps,2us": a link bandwidth (bits: Gbps, Mbps, Gbit/s; bytes: GB/s, MB/s) and a latency
// (ns, us, ms, s).
coordinator::NetworkModel parse_network(const std::string& text) {
  static const std::regex pattern(
      R"(^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(Gbps|Gbit/s|Mbps|Mbit/s|GB/s|MB/s)\s*,\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|ms|s)\s*$)");
  std::smatch match;
  if (!std::regex_match(text, match, pattern))
    throw UserError(fmt::format("--network '{}': expected BANDWIDTH,LATENCY such as 100Gbps,2us "
                                "(bandwidth in Gbps, Mbps, GB/s or MB/s; latency in ns, us, ms "
                                "or s)", text));
  static const std::map<std::string, double> bytes_per_second = {
      {"Gbps", 1e9 / 8}, {"Gbit/s", 1e9 / 8}, {"Mbps", 1e6 / 8}, {"Mbit/s", 1e6 / 8},
      {"GB/s", 1e9},     {"MB/s", 1e6}};
  static const std::map<std::string, double> seconds = {
      {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
  const double bandwidth = std::stod(match[1]) * bytes_per_second.at(match[2]);
  const double latency = std::stod(match[3]) * seconds.at(match[4]);
  if (!(bandwidth > 0))
    throw UserError(fmt::format("--network '{}': the bandwidth must be positive", text));
  return {latency, 1 / bandwidth, fmt::format("--network {}", text)};
}

coordinator::NetworkModel network_from_comm(const std::string& path) {
  const results::CommRecord sweep = results::read_comm(path);
  if (sweep.ranks < 2 || !(sweep.fit.beta_seconds_per_byte > 0))
    throw UserError(fmt::format("--comm '{}': the sweep ran on {} rank(s) and has no per-step "
                                "alpha and beta; run `dlscale comm` on 2 or more ranks",
                                path, sweep.ranks));
  return {sweep.fit.alpha_seconds, sweep.fit.beta_seconds_per_byte,
          fmt::format("--comm {} ({} ranks, {})", path, sweep.ranks, sweep.backend)};
}

std::vector<int> parse_rank_list(const std::string& text, const std::vector<int>& measured) {
  std::vector<int> ranks = measured;
  if (text.empty()) {
    for (int n = 1; n <= 1024; n *= 2) ranks.push_back(n);
  } else {
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
        throw UserError(fmt::format("--ranks: '{}' is not a rank count from 1 to {}", item,
                                    max_ranks));
      ranks.push_back(int(n));
    }
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

// The measured run nearest to `ranks` in rank count (on a log scale; ties go to the larger).
const results::RunRecord& reference_run(const std::vector<results::RunRecord>& runs, int ranks) {
  const results::RunRecord* best = &runs.front();
  for (const auto& run : runs) {
    const double distance = std::abs(std::log2(double(run.ranks) / ranks));
    const double best_distance = std::abs(std::log2(double(best->ranks) / ranks));
    if (distance < best_distance || (distance == best_distance && run.ranks > best->ranks))
      best = &run;
  }
  return *best;
}

std::string help_text(const po::options_description& options) {
  std::ostringstream text;
  text << "dlscale predict: what would this workload do at scales you cannot try? From a\n"
          "measured run or study (its per-layer backward times, forward and update times, and\n"
          "gradient buckets) and a network model, it predicts the iteration time, efficiency\n"
          "and the gap split (exposed communication, stragglers, other) at any rank count up\n"
          "to 100,000. The allreduce model is alpha-beta: ring 2(N-1)a + 2(N-1)/N m b, or\n"
          "tree 2 log2(N) a + 2 m b, replayed over the buckets in backward order.\n\n"
          "Usage: dlscale predict FILE.h5 (--network BANDWIDTH,LATENCY | --comm COMM.h5) [options]\n\n"
       << options
       << "\nExamples:\n"
          "  dlscale predict s.h5 --ranks 1024 --network 100Gbps,2us\n"
          "  dlscale predict s.h5 --ranks 8,64,512,4096 --network 25GB/s,5us --algorithm tree\n"
          "  mpirun -np 2 dlscale comm -b 1K -e 64M -f 2 --out c.h5 && dlscale predict s.h5 --comm c.h5\n\n"
          "Rank counts that were measured are predicted too, beside the measurement, so the\n"
          "model can be judged. Compute comes from the measured run nearest in rank count.\n";
  return text.str();
}

}  // namespace

int predict_command(int argc, char** argv) {
  PredictOptions options;
  po::options_description visible("Options", 100, 50);
  visible.add_options()
      ("help,h", "show this help and exit")
      ("ranks,r", po::value(&options.ranks),
       "comma-separated rank counts to predict (default: 1, 2, 4, ... 1024); the measured "
       "ones are always added")
      ("network", po::value(&options.network),
       "link bandwidth and latency, e.g. 100Gbps,2us or 25GB/s,1.5us")
      ("comm", po::value(&options.comm_path),
       "or: alpha and beta as `dlscale comm` fitted them on a real machine (its results file)")
      ("algorithm", po::value(&options.algorithm)->default_value(options.algorithm),
       "allreduce algorithm: ring or tree")
      ("overlap", po::value(&options.overlap)->default_value(options.overlap),
       "bucket sums during backward: on, off, or as measured")
      ("json", po::value(&options.json_path),
       "write the predictions as JSON to FILE ('-': standard output, instead of the table)");
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
    if (options.path.empty()) throw UserError("predict needs a results file: dlscale predict FILE.h5 --network ...");
    if (options.network.empty() == options.comm_path.empty())
      throw UserError("predict needs one network model: --network BANDWIDTH,LATENCY (such as "
                      "100Gbps,2us) or --comm FILE from `dlscale comm`");
    require_choice("--algorithm", "algorithm", options.algorithm, {"ring", "tree"});
    require_choice("--overlap", "setting", options.overlap, {"on", "off", "measured"});
    const coordinator::NetworkModel network = options.network.empty()
                                                  ? network_from_comm(options.comm_path)
                                                  : parse_network(options.network);
    const AllreduceAlgorithm algorithm =
        options.algorithm == "ring" ? AllreduceAlgorithm::ring : AllreduceAlgorithm::tree;

    const results::ResultsFile file = results::read_results(options.path);
    if (file.runs.empty())
      throw UserError(fmt::format("'{}' holds no training runs to predict from", options.path));
    for (const auto& run : file.runs)
      if (run.layers.empty())
        throw UserError(fmt::format("'{}' was written before per-layer times were recorded "
                                    "(schema 1); rerun the benchmark to predict from it",
                                    options.path));
    std::vector<int> measured_ranks;
    for (const auto& run : file.runs) measured_ranks.push_back(run.ranks);
    const std::vector<int> ranks = parse_rank_list(options.ranks, measured_ranks);

    const auto& baseline_run = *std::min_element(
        file.runs.begin(), file.runs.end(), [](const auto& a, const auto& b) { return a.ranks < b.ranks; });
    const auto& config = baseline_run.configuration;
    const bool strong = config.scaling == "strong";
    const double global_batch = double(config.batch_per_rank) * baseline_run.ranks;
    const auto batch_at = [&](int n) { return strong ? global_batch / n : double(config.batch_per_rank); };
    const auto predict = [&](int n) {
      const auto& run = reference_run(file.runs, n);
      const bool overlap = options.overlap == "measured" ? run.configuration.overlap : options.overlap == "on";
      return coordinator::predict_iteration(coordinator::profile_of(run), network, algorithm,
                                            overlap, n, batch_at(n));
    };
    const int p = baseline_run.ranks;
    const double baseline_seconds = predict(p).iteration_seconds;
    const results::StudySummary study = coordinator::analyze_study(file.runs);

    std::vector<PredictedRow> rows;
    for (int n : ranks) {
      const auto prediction = predict(n);
      PredictedRow row;
      row.ranks = n;
      row.iteration_seconds = prediction.iteration_seconds;
      // E = X(n)/X(p) * p/n with X = global batch / iteration time, as in the study.
      row.efficiency = (batch_at(n) * n / row.iteration_seconds) /
                       (batch_at(p) * p / baseline_seconds) * p / n;
      row.speedup = row.efficiency * n;
      row.gap_communication = prediction.exposed_communication_seconds / row.iteration_seconds;
      row.gap_load_imbalance = prediction.straggler_wait_seconds / row.iteration_seconds;
      row.gap_other = 1 - row.efficiency - row.gap_communication - row.gap_load_imbalance;
      for (const auto& point : study.points)
        if (point.ranks == n) row.measured_iteration_seconds = point.iteration_seconds;
      rows.push_back(row);
    }
    if (!options.json_path.empty()) {
      const std::string json = predictions_json(config.model, network, options.algorithm, rows);
      if (options.json_path == "-") {
        fmt::print("{}", json);
        return 0;
      }
      results::write_text_atomically(options.json_path, json);
    }

    fmt::print("{} ({} scaling, {}), {} allreduce, {}; alpha {:.3g} us, 1/beta {:.3g} GB/s\n",
               config.model, strong ? "strong" : "weak",
               strong ? fmt::format("global batch {:g}", global_batch)
                      : fmt::format("batch {}/rank", config.batch_per_rank),
               options.algorithm, network.source, network.alpha_seconds * 1e6,
               1 / network.beta_seconds_per_byte / 1e9);
    fmt::print("{:>7} {:>11} {:>11} {:>9} {:>7} {:>10} {:>7}  {:>16}\n", "ranks", "iter ms",
               "efficiency", "speedup", "comm", "imbalance", "other", "measured iter ms");
    for (const auto& row : rows) {
      const std::string measured =
          row.measured_iteration_seconds > 0
              ? fmt::format("{:.2f} ({:+.1f}%)", row.measured_iteration_seconds * 1e3,
                            (row.iteration_seconds / row.measured_iteration_seconds - 1) * 100)
              : "";
      fmt::print("{:>7} {:>11.2f} {:>10.1f}% {:>9.1f} {:>6.1f}% {:>9.1f}% {:>6.1f}%  {:>16}\n",
                 row.ranks, row.iteration_seconds * 1e3, row.efficiency * 100, row.speedup,
                 row.gap_communication * 100, row.gap_load_imbalance * 100, row.gap_other * 100,
                 measured);
    }
    return 0;
  });
}

}  // namespace dlscale::cli
