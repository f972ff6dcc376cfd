// Boost.Program_options definitions for `dlscale run`; every value is range-checked here.
#include "cli/run_options.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::cli {

namespace po = boost::program_options;

namespace {

// Numbers are read as signed 64-bit so "-3" reaches our range check instead of wrapping.
struct RawNumbers {
  long long batch = 0, iterations = 0, warmup = 0, threads = 0, seed = 0;
};

po::options_description option_descriptions(RunOptions& options, RawNumbers& raw) {
  const RunOptions defaults;
  po::options_description workload("Workload");
  workload.add_options()
      ("model,m", po::value(&options.model)->default_value(defaults.model),
       "built-in model (see --list-models), a fully connected net "
       "fcn:INPUT,HIDDEN,...,CLASSES (e.g. fcn:784,2048,10) or an LSTM language model "
       "lstm:SEQ,HIDDEN,LAYERS,VOCAB (e.g. lstm:32,512,2,10000)")
      ("batch,b", po::value(&raw.batch),
       "samples per rank per step (default: the model's reference CPU batch)")
      ("iters,n", po::value(&raw.iterations)->default_value(defaults.measured_iterations),
       "measured iterations")
      ("warmup,w", po::value(&raw.warmup)->default_value(defaults.warmup_iterations),
       "warm-up iterations, recorded but left out of the statistics")
      ("lr", po::value(&options.learning_rate)->default_value(defaults.learning_rate),
       "SGD learning rate (momentum is 0.9)")
      ("seed", po::value(&raw.seed)->default_value((long long)defaults.seed),
       "seed for weights and synthetic data");

  po::options_description system("System");
  system.add_options()
      ("threads,t", po::value(&raw.threads)->default_value(defaults.threads),
       "compute threads per rank (OpenBLAS and OpenMP); keep ranks x threads <= cores")
      ("device", po::value(&options.device)->default_value(defaults.device),
       "where each rank computes: cpu")
      ("comm", po::value(&options.comm)->default_value(defaults.comm),
       "gradient allreduce backend: mpi");

  po::options_description output("Output");
  output.add_options()
      ("out,o", po::value(&options.output_path),
       "results file (HDF5; default dlscale-MODEL-NPr-TIME.h5 in the current directory)")
      ("overwrite", po::bool_switch(&options.overwrite), "replace an existing results file")
      ("log-level", po::value(&options.log_level)->default_value(defaults.log_level),
       "trace, debug, info, warn or error");
  po::options_description all;
  all.add(workload).add(system).add(output);
  return all;
}

po::options_description informational_options(std::string& config_path) {
  po::options_description general("General");
  general.add_options()
      ("help,h", "show this help and exit")
      ("version", "show the version and exit")
      ("list-models", "list the built-in models with their sizes and exit")
      ("config", po::value(&config_path),
       "read options from FILE, one 'key = value' per line with the long option names; "
       "the command line wins");
  return general;
}

int positive(long long value, const char* option) {
  if (value < 1 || value > INT32_MAX)
    throw UserError(fmt::format("--{} must be a positive integer, got {}", option, value));
  return int(value);
}

void check_values(RunOptions& options, const RawNumbers& raw, const po::variables_map& values) {
  if (values.count("batch")) options.batch = positive(raw.batch, "batch");
  options.measured_iterations = positive(raw.iterations, "iters");
  options.threads = positive(raw.threads, "threads");
  if (raw.warmup < 0 || raw.warmup > INT32_MAX)
    throw UserError(fmt::format("--warmup must be zero or a positive integer, got {}", raw.warmup));
  options.warmup_iterations = int(raw.warmup);
  if (raw.seed < 0) throw UserError(fmt::format("--seed must not be negative, got {}", raw.seed));
  options.seed = std::uint64_t(raw.seed);
  if (!(options.learning_rate > 0) || options.learning_rate > 10)
    throw UserError(fmt::format("--lr must be in (0, 10], got {}", options.learning_rate));
  if (options.output_path.empty() && values.count("out"))
    throw UserError("--out must not be empty");
  require_choice("--log-level", "level", options.log_level,
                 {"trace", "debug", "info", "warn", "error"});
}

}  // namespace

RunOptions parse_run_options(const std::vector<std::string>& arguments) {
  RunOptions options;
  RawNumbers raw;
  std::string config_path;
  po::options_description visible;
  visible.add(informational_options(config_path)).add(option_descriptions(options, raw));
  po::variables_map values;
  try {
    po::store(po::command_line_parser(arguments).options(visible).run(), values);
    if (values.count("config")) {
      const std::string path = values["config"].as<std::string>();
      std::ifstream file(path);
      if (!file) throw UserError(fmt::format("--config: cannot read '{}'", path));
      po::store(po::parse_config_file(file, visible), values);
    }
    po::notify(values);
  } catch (const po::error& error) {
    throw UserError(error.what());
  }
  if (values.count("help")) options.action = RunOptions::Action::show_help;
  else if (values.count("version")) options.action = RunOptions::Action::show_version;
  else if (values.count("list-models")) options.action = RunOptions::Action::list_models;
  else check_values(options, raw, values);
  return options;
}

std::string run_help_text() {
  RunOptions options;
  RawNumbers raw;
  std::string config_path;
  po::options_description visible(100, 50);
  visible.add(informational_options(config_path)).add(option_descriptions(options, raw));
  std::ostringstream text;
  text << "dlscale: how well does data-parallel training scale on this machine, and where does\n"
          "the time go? Every MPI rank trains the same model on its own synthetic data and the\n"
          "ranks average gradients with an allreduce. Rank 0 gathers per-rank, per-iteration\n"
          "phase timings (forward, backward, allreduce, update, step), prints a summary and\n"
          "writes everything to one HDF5 file.\n\n"
          "Usage: mpirun -np N dlscale [run] [options]\n\n"
       << visible
       << "\nExamples:\n"
          "  mpirun -np 4 dlscale --model fcn-r --batch 64 --iters 20 --out r.h5\n"
          "  mpirun -np 2 dlscale --model fcn:784,512,10 --threads 1\n"
          "  dlscale --list-models\n\n"
          "Exit status: 0 on success, 2 for a bad option or input, 1 for a failure while running.\n"
          "The results file is documented in docs/results-format.md.\n";
  return text.str();
}

}  // namespace dlscale::cli
