#include "cli/slurm_command.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command_setup.hpp"
#include "cli/data_files.hpp"
#include "cli/run_options.hpp"
#include "core/errors.hpp"
#include "results/output_file.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::cli {

namespace {

namespace po = boost::program_options;

constexpr const char* settings_begin = "# --- settings ---";
constexpr const char* settings_end = "# --- end of settings ---";

struct SlurmOptions {
  std::string nodes = "1,2,4";
  std::string tasks_per_node = "1";
  int cpus_per_task = 1;
  std::string time_limit = "00:30:00";
  std::string partition, account;
  std::string dlscale_path;
  std::string output_path;  // empty: standard output
  bool overwrite = false;
  std::vector<std::string> dlscale_options;  // passed to every run
};

// The installed copy of a slurm/ script, or this source tree's.
std::filesystem::path slurm_script(const std::string& name) {
  return data_file("slurm/" + name, "slurm/" + name);
}

// Refuses anything but `pattern`; the message names the option and what is allowed.
const std::string& require_match(const std::string& value, const std::regex& pattern,
                                 const std::string& option, const std::string& allowed) {
  if (!std::regex_match(value, pattern))
    throw UserError(fmt::format("{} '{}' is not allowed: {}", option, value, allowed));
  return value;
}

// "1,2,4" -> "1 2 4", each a positive integer.
std::string number_list(const std::string& value, const std::string& option) {
  static const std::regex list(R"([1-9][0-9]{0,5}(,[1-9][0-9]{0,5})*)");
  require_match(value, list, option, "a comma-separated list of positive integers, e.g. 1,2,4,8");
  std::string words = value;
  std::replace(words.begin(), words.end(), ',', ' ');
  return words;
}

// Single quotes make the text literal in bash; validation already excluded quotes themselves.
std::string quoted(const std::string& text) { return fmt::format("'{}'", text); }

std::string settings_block(const SlurmOptions& options) {
  static const std::regex name(R"([A-Za-z0-9_.-]{1,64})");
  static const std::regex time(R"(([0-9]{1,3}-)?[0-9]{1,3}(:[0-5][0-9]){0,2})");
  static const std::regex path(R"([A-Za-z0-9_./+-]{1,4096})");
  static const std::regex option_word(R"([A-Za-z0-9_.,:=/+@%-]{1,256})");
  const std::string names_allowed = "letters, digits, '_', '.' and '-'";
  if (options.cpus_per_task < 1 || options.cpus_per_task > 4096)
    throw UserError(fmt::format("--cpus-per-task must be from 1 to 4096, got {}",
                                options.cpus_per_task));
  require_match(options.time_limit, time, "--time",
                "Slurm's [DAYS-]HOURS[:MINUTES[:SECONDS]], e.g. 01:30:00");
  if (!options.partition.empty())
    require_match(options.partition, name, "--partition", names_allowed);
  if (!options.account.empty()) require_match(options.account, name, "--account", names_allowed);
  require_match(options.dlscale_path, path, "--dlscale", "a path of letters, digits and _./+-");
  for (const auto& word : options.dlscale_options)
    require_match(word, option_word, "dlscale option",
                  "letters, digits and _.,:=/+@%- only (no spaces, quotes or shell characters)");
  // The options must also be ones dlscale accepts: its own parser says which is wrong.
  const RunOptions run = parse_run_options(options.dlscale_options);
  workloads::make_workload(run.model);

  std::string block = std::string(settings_begin) + "\n";
  block += fmt::format("NODE_COUNTS={}\n", quoted(number_list(options.nodes, "--nodes")));
  block += fmt::format("TASKS_PER_NODE={}\n",
                       quoted(number_list(options.tasks_per_node, "--tasks-per-node")));
  block += fmt::format("CPUS_PER_TASK={}\n", options.cpus_per_task);
  block += fmt::format("TIME_LIMIT={}\n", quoted(options.time_limit));
  block += fmt::format("PARTITION={}\n", quoted(options.partition));
  block += fmt::format("ACCOUNT={}\n", quoted(options.account));
  block += fmt::format("DLSCALE={}\n", quoted(options.dlscale_path));
  block += fmt::format("RUN_SCRIPT={}\n", quoted(slurm_script("dlscale-run.sbatch").string()));
  std::vector<std::string> words;
  for (const auto& word : options.dlscale_options) words.push_back(quoted(word));
  block += fmt::format("DLSCALE_OPTIONS=({})\n", fmt::join(words, " "));
  return block + settings_end;
}

// The one line printed after the script is written: what it holds and how to start it.
std::string written_summary(const SlurmOptions& options) {
  const auto count = [](const std::string& list) {
    return 1 + std::count(list.begin(), list.end(), ',');
  };
  const auto jobs = count(options.nodes) * count(options.tasks_per_node);
  return fmt::format("wrote {}: {} run job{} ({} node{} x {} task{} per node) and a merge job; "
                     "submit them with `bash {}`",
                     options.output_path, jobs, jobs == 1 ? "" : "s", options.nodes,
                     options.nodes == "1" ? "" : "s", options.tasks_per_node,
                     options.tasks_per_node == "1" ? "" : "s", options.output_path);
}

std::string read_template() {
  const auto path = slurm_script("dlscale-node-study.sh");
  std::ifstream file(path);
  if (!file) throw UserError(fmt::format("cannot read the study template '{}'", path.string()));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string help_text(const po::options_description& options) {
  std::ostringstream text;
  text << "dlscale slurm: write a Slurm node-count study for your sizes. The script submits one\n"
          "batch job per (nodes, tasks per node) pair, each an `srun --mpi=pmix dlscale` run,\n"
          "then a job that merges the results into one study file with an HTML report\n"
          "(slurm/dlscale-node-study.sh with its settings filled in). Options it does not know\n"
          "are dlscale options for every run, checked as dlscale would check them.\n\n"
          "Usage: dlscale slurm --nodes 1,2,4,8 --tasks-per-node 4 [options] [dlscale options]\n\n"
       << options
       << "\nExample:\n"
          "  dlscale slurm --nodes 1,2,4,8 --tasks-per-node 4 --cpus-per-task 8 --model resnet-50 \\\n"
          "      --batch 32 --ranks all -o study.sh && bash study.sh\n";
  return text.str();
}

}  // namespace

int slurm_command(int argc, char** argv) {
  SlurmOptions options;
  std::error_code ignored;
  options.dlscale_path = std::filesystem::read_symlink("/proc/self/exe", ignored).string();
  po::options_description visible("Options", 100, 50);
  visible.add_options()
      ("help,h", "show this help and exit")
      ("nodes", po::value(&options.nodes)->default_value(options.nodes),
       "node counts, comma-separated: one job each")
      ("tasks-per-node", po::value(&options.tasks_per_node)->default_value(options.tasks_per_node),
       "MPI ranks per node, comma-separated: one job per (nodes, tasks) pair")
      ("cpus-per-task", po::value(&options.cpus_per_task)->default_value(options.cpus_per_task),
       "cores per rank; dlscale's --threads")
      ("time", po::value(&options.time_limit)->default_value(options.time_limit),
       "time limit of each job")
      ("partition", po::value(&options.partition), "Slurm partition (default: the cluster's)")
      ("account", po::value(&options.account), "Slurm account to charge")
      ("dlscale", po::value(&options.dlscale_path), "the dlscale binary the jobs run (default: this one)")
      ("output,o", po::value(&options.output_path), "write the script to FILE (default: print it)")
      ("overwrite", po::bool_switch(&options.overwrite), "replace an existing FILE");
  return exit_status_alone([&] {
    po::variables_map values;
    try {
      const auto parsed = po::command_line_parser(argc, argv)
                              .options(visible)
                              .style(strict_command_line_style())
                              .allow_unregistered()
                              .run();
      po::store(parsed, values);
      po::notify(values);
      options.dlscale_options = po::collect_unrecognized(parsed.options, po::include_positional);
    } catch (const po::error& error) {
      throw UserError(error.what());
    }
    if (values.count("help")) {
      fmt::print("{}", help_text(visible));
      return 0;
    }
    if (!options.output_path.empty())
      results::check_output_path(options.output_path, options.overwrite, "--output");
    const std::string block = settings_block(options);
    std::string script = read_template();
    const auto begin = script.find(settings_begin), end = script.find(settings_end);
    if (begin == std::string::npos || end == std::string::npos)
      throw UserError("the study template has no settings block; reinstall dlscale");
    script.replace(begin, end + std::string(settings_end).size() - begin, block);
    if (options.output_path.empty()) {
      fmt::print("{}", script);
    } else {
      results::write_text_atomically(options.output_path, script);
      std::filesystem::permissions(options.output_path, std::filesystem::perms::owner_exec,
                                   std::filesystem::perm_options::add);
      fmt::print("{}\n", written_summary(options));
    }
    return 0;
  });
}

}  // namespace dlscale::cli
