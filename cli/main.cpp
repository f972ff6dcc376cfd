// dlscale's entry point: picks the subcommand and hands over. No logic lives here.
#include <cstring>

#include "cli/comm_command.hpp"
#include "cli/command_setup.hpp"
#include "cli/merge_command.hpp"
#include "cli/predict_command.hpp"
#include "cli/report_command.hpp"
#include "cli/run_command.hpp"
#include "cli/schema_command.hpp"
#include "cli/slurm_command.hpp"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand's name
};

// The training benchmark (`run`, the default) and `comm` run under mpirun; the others do not.
constexpr Subcommand subcommands[] = {{"comm", dlscale::cli::comm_command},
                                      {"predict", dlscale::cli::predict_command},
                                      {"merge", dlscale::cli::merge_command},
                                      {"report", dlscale::cli::report_command},
                                      {"slurm", dlscale::cli::slurm_command},
                                      {"schema", dlscale::cli::schema_command}};

}  // namespace

int main(int argc, char** argv) {
  if (!dlscale::cli::prepare_process()) return 2;
  if (argc > 1) {
    for (const auto& subcommand : subcommands)
      if (std::strcmp(argv[1], subcommand.name) == 0) return subcommand.run(argc - 1, argv + 1);
    // `dlscale run ...` and plain `dlscale ...` both run the training benchmark.
    if (std::strcmp(argv[1], "run") == 0) {
      argv[1] = argv[0];
      return dlscale::cli::run_command(argc - 1, argv + 1);
    }
  }
  return dlscale::cli::run_command(argc, argv);
}
