// What every subcommand sets up the same way: its log lines ("dlscale: error: ..." from rank 0,
// "dlscale[rank N]: ..." from the others, which speak up only for warnings and errors), and how a
// results file records the command that made it and when it started.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace dlscale::cli {

void start_command_logging(int rank);

// "dlscale SUBCOMMAND ARG ...": argv excludes the subcommand word, argv[0] is the program.
std::string joined_command_line(std::string_view subcommand, int argc, char** argv);

// ISO 8601 UTC to the second, e.g. 2025-01-31T12:00:00Z.
std::string utc_timestamp(std::chrono::system_clock::time_point time);

}  // namespace dlscale::cli
