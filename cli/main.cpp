// dlscale's entry point: picks the subcommand and hands over. No logic lives here.
#include <cstring>

#include "cli/comm_command.hpp"
#include "cli/run_command.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "comm") == 0) {
    argv[1] = argv[0];
    return dlscale::cli::comm_command(argc - 1, argv + 1);
  }
  // `dlscale run ...` and plain `dlscale ...` both run the training benchmark.
  if (argc > 1 && std::strcmp(argv[1], "run") == 0) {
    argv[1] = argv[0];
    return dlscale::cli::run_command(argc - 1, argv + 1);
  }
  return dlscale::cli::run_command(argc, argv);
}
