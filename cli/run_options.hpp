// Options of `dlscale run`, parsed from the command line and an optional --config file, and
// validated here, so nothing past the CLI layer sees an unchecked or stringly-typed value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlscale::cli {

struct RunOptions {
  enum class Action { train, show_help, show_version, list_models };
  Action action = Action::train;

  std::string model = "fcn-r";
  std::optional<int> batch;  // per rank; unset means the workload's reference CPU batch
  int measured_iterations = 20;
  int warmup_iterations = 3;
  int threads = 1;
  std::string comm = "mpi";
  std::string device = "cpu";
  std::uint64_t seed = 42;
  double learning_rate = 0.01;
  std::string output_path;  // empty: a default name made from the model, ranks and time
  bool overwrite = false;
  std::string log_level = "info";
};

// `arguments` excludes the program name and subcommand. Throws UserError naming the option.
RunOptions parse_run_options(const std::vector<std::string>& arguments);

std::string run_help_text();

}  // namespace dlscale::cli
