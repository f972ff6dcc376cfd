#include "cli/slurm_command.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>

#include "cli/command_setup.hpp"
#include "cli/count_list.hpp"
#include "cli/data_files.hpp"
#include "cli/run_options.hpp"
#include "core/errors.hpp"
#include "kernels/device_factory.hpp"
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
  bool share_nodes = false;  // let other jobs onto the nodes (no --exclusive)
  // GPUs of each run job, as Slurm spells them: per node ([TYPE:]N), per task, or a --gres list.
  std::string gpus_per_node, gpus_per_task, gres;
  // Where and how the run jobs run: node features, quality of service, reservation, the most
  // network switches (COUNT[@MAX-WAIT]) and srun's MPI plugin.
  std::string constraint, qos, reservation, switches;
  std::string mpi_plugin = "pmix";
  std::vector<std::string> dlscale_options;  // passed to every run
};

// The job sizes of a study, checked: ascending, without repeats.
struct StudySizes {
  std::vector<int> node_counts;
  std::vector<int> tasks_per_node;
};

// A study is one job per size: more than this is a typo, not a study, and a long list is refused
// before it is read.
constexpr std::size_t most_jobs = 256;
constexpr std::size_t longest_count_list = 1000;  // characters
constexpr int most_nodes = 100000, most_tasks_per_node = 4096;

// The installed copy of a slurm/ script, or this source tree's.
std::filesystem::path slurm_script(const std::string& name) {
  return data_file("slurm/" + name, "slurm/" + name);
}

// Refuses anything but `pattern`; the message names the option and what is allowed. The
// patterns are bounded, so a long value fails fast instead of recursing through std::regex.
const std::string& require_match(const std::string& value, const std::regex& pattern,
                                 const std::string& option, const std::string& allowed) {
  if (value.size() > 4096 || !std::regex_match(value, pattern))
    throw UserError(fmt::format("{} '{}' is not allowed: {}", option,
                                value.size() > 80 ? value.substr(0, 80) + "..." : value, allowed));
  return value;
}

std::vector<int> count_list(const std::string& value, const std::string& option, int largest,
                            const std::string& what) {
  if (value.size() > longest_count_list)
    throw UserError(fmt::format("{}: a list of {} characters; a study takes at most {} jobs",
                                option, value.size(), most_jobs));
  return parse_count_list(value, option, largest, what);
}

// A word bash reads back as exactly `text`: single quotes, with each ' written as '\''.
std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// `text` as typed into a shell: bare when every character is plain, else shell_quoted.
std::string shell_word(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./+-=:,@%", c) != nullptr;
  });
  return plain ? text : shell_quoted(text);
}

// A path written into the script: quoted there, so any character is safe in bash, but a control
// character (a newline) would break the job's log lines, and a leading '-' would be an option.
const std::string& require_path(const std::string& path, const std::string& option) {
  if (path.empty() || path.size() > 4096 || path.front() == '-' ||
      std::any_of(path.begin(), path.end(),
                  [](char c) { return std::iscntrl(static_cast<unsigned char>(c)) != 0; }))
    throw UserError(
        fmt::format("{} must be a path without control characters that does not "
                    "start with '-', got '{}'",
                    option, path.substr(0, 80)));
  return path;
}

// The GPUs of one node's worth of tasks: N of --gpus-per-node [TYPE:]N, or 0 where the jobs ask
// for GPUs another way (per task, or through --gres).
int gpus_per_node_count(const SlurmOptions& options) {
  if (options.gpus_per_node.empty()) return 0;
  return std::stoi(options.gpus_per_node.substr(options.gpus_per_node.rfind(':') + 1));
}

// A GPU run asks Slurm for GPUs, or its jobs start on nodes whose GPUs they may not use and every
// one fails; each rank wants one of its own, or it measures GPUs shared between ranks.
void check_gpu_request(const SlurmOptions& options, const StudySizes& sizes,
                       const RunOptions& run) {
  const auto& devices = kernels::device_records();
  const auto device = std::find_if(devices.begin(), devices.end(),
                                   [&](const auto& record) { return record.name == run.device; });
  if (device == devices.end() || device->memory_is_host) return;
  const bool gres_has_gpus = options.gres.find("gpu") != std::string::npos;
  if (options.gpus_per_node.empty() && options.gpus_per_task.empty() && !gres_has_gpus)
    throw UserError(
        fmt::format("--device {} needs a GPU for each rank, and the jobs ask Slurm for none: add "
                    "--gpus-per-node N (N >= --tasks-per-node), --gpus-per-task 1 or --gres gpu:N",
                    run.device));
  const int gpus = gpus_per_node_count(options);
  const int most_tasks = sizes.tasks_per_node.back();
  if (gpus > 0 && most_tasks > gpus)
    throw UserError(fmt::format(
        "--tasks-per-node {} is more than --gpus-per-node {}: ranks would share GPUs; ask for "
        "at least one GPU per task",
        most_tasks, gpus));
}

// Everything the run script would refuse at the start of each job is refused here, before
// anything is queued: options dlscale rejects, those the script sets itself, and sizes a job
// cannot run.
void check_runs_would_start(const SlurmOptions& options, const StudySizes& sizes) {
  // Parse as each job will: there SLURM_CPUS_PER_TASK is --cpus-per-task and sets the default
  // --threads, whatever this shell's (an salloc session's) says.
  ::setenv("SLURM_CPUS_PER_TASK", std::to_string(options.cpus_per_task).c_str(), 1);
  const RunOptions run = parse_run_options(options.dlscale_options);
  if (run.action != RunOptions::Action::train)
    throw UserError(
        "--help, --version and --list-models are not options of a run; "
        "ask dlscale itself");
  if (!run.output_path.empty())
    throw UserError(
        "--out: the run script names each job's results file "
        "(DLSCALE_RESULTS/job-JOBID/dlscale.h5); leave --out out");
  workloads::make_workload(run.model);
  check_gpu_request(options, sizes, run);
  // The script gives each rank --cpus-per-task cores (and OMP_NUM_THREADS to match).
  if (run.threads.back() > options.cpus_per_task && !run.oversubscribe)
    throw UserError(
        fmt::format("--threads {} is more than the job's --cpus-per-task {}: each "
                    "rank has that many cores; raise --cpus-per-task (or add "
                    "--oversubscribe)",
                    run.threads.back(), options.cpus_per_task));
  // Each job is a launch of nodes x tasks ranks: its rank sweep, and for strong scaling the
  // global batch split over each of its points. (The workload's default batch only matters for
  // weak scaling, which always splits, so any stands in for it.)
  constexpr int any_default_batch = 1;
  for (const int nodes : sizes.node_counts) {
    for (const int tasks : sizes.tasks_per_node) {
      try {
        batches_per_rank(run, sweep_rank_counts(run, nodes * tasks), any_default_batch);
      } catch (const UserError& error) {
        throw UserError(
            fmt::format("the job of {} node(s) x {} task(s) would refuse its "
                        "options: {}",
                        nodes, tasks, error.what()));
      }
    }
  }
}

std::string settings_block(const SlurmOptions& options, const StudySizes& sizes) {
  static const std::regex name(R"([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})");
  static const std::regex time(R"(([0-9]{1,3}-)?[0-9]{1,5}(:[0-5]?[0-9]){0,2})");
  static const std::regex option_word(R"([A-Za-z0-9_.,:=/+@%-]{1,256})");
  const std::string names_allowed =
      "letters, digits, '_', '.' and '-', starting with a letter, digit or '_'";
  if (options.cpus_per_task < 1 || options.cpus_per_task > 4096)
    throw UserError(
        fmt::format("--cpus-per-task must be from 1 to 4096, got {}", options.cpus_per_task));
  require_match(options.time_limit, time, "--time",
                "Slurm's MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS or "
                "DAYS-HOURS[:MINUTES[:SECONDS]], e.g. 90 or 01:30:00");
  if (!options.partition.empty())
    require_match(options.partition, name, "--partition", names_allowed);
  if (!options.account.empty()) require_match(options.account, name, "--account", names_allowed);
  if (!options.qos.empty()) require_match(options.qos, name, "--qos", names_allowed);
  if (!options.reservation.empty())
    require_match(options.reservation, name, "--reservation", names_allowed);
  static const std::regex gpu_count(R"(([A-Za-z0-9_][A-Za-z0-9_.-]{0,63}:)?[1-9][0-9]{0,3})");
  const std::string gpus_allowed = "a count, or TYPE:COUNT (e.g. 4 or a100:4)";
  if (!options.gpus_per_node.empty())
    require_match(options.gpus_per_node, gpu_count, "--gpus-per-node", gpus_allowed);
  if (!options.gpus_per_task.empty())
    require_match(options.gpus_per_task, gpu_count, "--gpus-per-task", gpus_allowed);
  static const std::regex gres(R"([A-Za-z0-9_][A-Za-z0-9_.:,-]{0,255})");
  if (!options.gres.empty())
    require_match(options.gres, gres, "--gres", "Slurm's NAME[:TYPE][:COUNT],... (e.g. gpu:4)");
  static const std::regex constraint(R"([A-Za-z0-9_.:&|,*()\[\]-]{1,256})");
  if (!options.constraint.empty())
    require_match(options.constraint, constraint, "--constraint",
                  "node features joined by & | , with [ ] ( ) * as Slurm reads them");
  static const std::regex switches(
      R"([1-9][0-9]{0,3}(@([0-9]{1,3}-)?[0-9]{1,5}(:[0-5]?[0-9]){0,2})?)");
  if (!options.switches.empty())
    require_match(options.switches, switches, "--switches",
                  "COUNT or COUNT@MAX-WAIT, e.g. 1 or 1@30:00");
  static const std::regex plugin(R"([A-Za-z0-9_]{1,32})");
  require_match(options.mpi_plugin, plugin, "--mpi", "a Slurm MPI plugin name, e.g. pmix or pmi2");
  require_path(options.dlscale_path, "--dlscale");
  for (const auto& word : options.dlscale_options)
    require_match(word, option_word, "dlscale option",
                  "letters, digits and _.,:=/+@%- only (no spaces, quotes or shell characters)");
  check_runs_would_start(options, sizes);
  const std::string run_script = slurm_script("dlscale-run.sbatch").string();
  require_path(run_script, "the installed run script");

  std::string block = std::string(settings_begin) + "\n";
  block += fmt::format("NODE_COUNTS={}\n",
                       shell_quoted(fmt::format("{}", fmt::join(sizes.node_counts, " "))));
  block += fmt::format("TASKS_PER_NODE={}\n",
                       shell_quoted(fmt::format("{}", fmt::join(sizes.tasks_per_node, " "))));
  block += fmt::format("CPUS_PER_TASK={}\n", options.cpus_per_task);
  block += fmt::format("TIME_LIMIT={}\n", shell_quoted(options.time_limit));
  block += fmt::format("PARTITION={}\n", shell_quoted(options.partition));
  block += fmt::format("ACCOUNT={}\n", shell_quoted(options.account));
  block += fmt::format("SHARE_NODES={}\n", options.share_nodes ? "yes" : "no");
  block += fmt::format("GPUS_PER_NODE={}\n", shell_quoted(options.gpus_per_node));
  block += fmt::format("GPUS_PER_TASK={}\n", shell_quoted(options.gpus_per_task));
  block += fmt::format("GRES={}\n", shell_quoted(options.gres));
  block += fmt::format("CONSTRAINT={}\n", shell_quoted(options.constraint));
  block += fmt::format("QOS={}\n", shell_quoted(options.qos));
  block += fmt::format("RESERVATION={}\n", shell_quoted(options.reservation));
  block += fmt::format("SWITCHES={}\n", shell_quoted(options.switches));
  block += fmt::format("MPI_PLUGIN={}\n", shell_quoted(options.mpi_plugin));
  block += fmt::format("DLSCALE={}\n", shell_quoted(options.dlscale_path));
  block += fmt::format("RUN_SCRIPT={}\n", shell_quoted(run_script));
  std::vector<std::string> words;
  for (const auto& word : options.dlscale_options) words.push_back(shell_quoted(word));
  block += fmt::format("DLSCALE_OPTIONS=({})\n", fmt::join(words, " "));
  return block + settings_end;
}

// The one line printed after the script is written: what it holds and how to start it.
std::string written_summary(const SlurmOptions& options, const StudySizes& sizes) {
  const auto plural = [](const std::vector<int>& counts) {
    return counts.size() == 1 && counts.front() == 1 ? "" : "s";
  };
  const std::size_t jobs = sizes.node_counts.size() * sizes.tasks_per_node.size();
  return fmt::format(
      "wrote {}: {} run job{} ({} node{} x {} task{} per node) and a merge job; "
      "submit them with `bash {}`",
      options.output_path, jobs, jobs == 1 ? "" : "s", fmt::join(sizes.node_counts, ","),
      plural(sizes.node_counts), fmt::join(sizes.tasks_per_node, ","), plural(sizes.tasks_per_node),
      shell_word(options.output_path));
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
  text
      << "dlscale slurm: write a Slurm node-count study for your sizes. The script submits one\n"
         "batch job per (nodes, tasks per node) pair, each an `srun --mpi=pmix --cpu-bind=cores\n"
         "--cpus-per-task=N dlscale` run on whole nodes (--exclusive, unless --share-nodes), each\n"
         "rank bound to its N cores and, in a job with GPUs, to a GPU; then a one-CPU job that "
         "starts\n"
         "once every run job has ended, however it ended, and merges the results files that\n"
         "exist into one study file with an HTML report; a job that left none is named in the\n"
         "merge job's log and in the report, with its exit state. Points measured by several\n"
         "jobs (say, 1 and 2 ranks with --ranks all) become repeats of the study. The script\n"
         "is slurm/dlscale-node-study.sh with its settings filled in. Options it does not know\n"
         "are dlscale options for every run, checked here as each job would check them, so a\n"
         "study is refused before it queues rather than failing in every job.\n\n"
         "Usage: dlscale slurm --nodes 1,2,4,8 --tasks-per-node 4 [options] [dlscale options]\n\n"
      << options
      << "\nExample:\n"
         "  dlscale slurm --nodes 1,2,4,8 --tasks-per-node 4 --cpus-per-task 8 --model resnet-50 "
         "\\\n"
         "      --batch 32 --ranks all -o study.sh && bash study.sh\n"
         "  dlscale slurm --nodes 1,2,4 --tasks-per-node 4 --gpus-per-node 4 --switches 1 "
         "--device cuda \\\n"
         "      --comm nccl --model resnet-50 --ranks all -o gpu-study.sh && bash gpu-study.sh\n";
  return text.str();
}

}  // namespace

int slurm_command(int argc, char** argv) {
  SlurmOptions options;
  std::error_code ignored;
  options.dlscale_path = std::filesystem::read_symlink("/proc/self/exe", ignored).string();
  po::options_description visible("Options", 100, 50);
  // clang-format off
  visible.add_options()("help,h", "show this help and exit")(
      "nodes", po::value(&options.nodes)->default_value(options.nodes),
      "node counts, comma-separated: one job each")(
      "tasks-per-node", po::value(&options.tasks_per_node)->default_value(options.tasks_per_node),
      "MPI ranks per node, comma-separated: one job per (nodes, tasks) pair")(
      "cpus-per-task", po::value(&options.cpus_per_task)->default_value(options.cpus_per_task),
      "cores per rank; dlscale's --threads")(
      "time", po::value(&options.time_limit)->default_value(options.time_limit),
      "time limit of each job, as Slurm reads it: MINUTES, MINUTES:SECONDS, "
      "HOURS:MINUTES:SECONDS or DAYS-HOURS[:MINUTES[:SECONDS]]")(
      "partition", po::value(&options.partition), "Slurm partition (default: the cluster's)")(
      "account", po::value(&options.account), "Slurm account to charge")(
      "qos", po::value(&options.qos), "Slurm quality of service of every job")(
      "reservation", po::value(&options.reservation), "Slurm reservation to run every job in")(
      "gpus-per-node", po::value(&options.gpus_per_node),
      "GPUs of each run job per node, [TYPE:]N; --device cuda needs GPUs (this, "
      "--gpus-per-task or --gres), and each rank is bound to a GPU of its own")(
      "gpus-per-task", po::value(&options.gpus_per_task), "GPUs per rank, [TYPE:]N")(
      "gres", po::value(&options.gres), "generic resources per node, as sbatch --gres (gpu:4)")(
      "constraint", po::value(&options.constraint),
      "node features every run job needs (sbatch --constraint), e.g. the same CPU or network "
      "at every node count")(
      "switches", po::value(&options.switches),
      "the most network switches a run job may span, COUNT[@MAX-WAIT] (sbatch --switches): a "
      "scaling study wants the same topology at every node count")(
      "mpi", po::value(&options.mpi_plugin)->default_value(options.mpi_plugin),
      "srun's MPI plugin (srun --mpi): pmix for Debian's Open MPI; pmi2 or others where the "
      "cluster's MPI speaks them")(
      "share-nodes", po::bool_switch(&options.share_nodes),
      "let other jobs share the nodes (default: whole nodes, --exclusive, so that neighbours "
      "do not disturb the measurements)")("dlscale", po::value(&options.dlscale_path),
                                          "the dlscale binary the jobs run (default: this one)")(
      "output,o", po::value(&options.output_path), "write the script to FILE (default: print it)")(
      "overwrite", po::bool_switch(&options.overwrite), "replace an existing FILE");
  // clang-format on
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
    const StudySizes sizes{
        count_list(options.nodes, "--nodes", most_nodes, "node count"),
        count_list(options.tasks_per_node, "--tasks-per-node", most_tasks_per_node, "task count")};
    if (sizes.node_counts.size() * sizes.tasks_per_node.size() > most_jobs)
      throw UserError(
          fmt::format("--nodes x --tasks-per-node make {} jobs; a study takes at most {}",
                      sizes.node_counts.size() * sizes.tasks_per_node.size(), most_jobs));
    const std::string block = settings_block(options, sizes);
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
      fmt::print("{}\n", written_summary(options, sizes));
    }
    return 0;
  });
}

}  // namespace dlscale::cli
