// `dlscale schema`: parses its one option and prints what printers/results_schema_printer formats.
#include "cli/schema_command.hpp"

#include <sstream>
#include <string>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "cli/command_setup.hpp"
#include "printers/results_schema_printer.hpp"

namespace dlscale::cli {

namespace {

namespace po = boost::program_options;

std::string help_text(const po::options_description& options) {
  std::ostringstream text;
  text << "dlscale schema: the columns of a results file's /study table (one row per run: its\n"
          "scaling, gap split and convergence), each with its type, units, the schema version\n"
          "that brought it and what it means. A file of an earlier version lacks the columns\n"
          "that came after it, and readers do without them.\n\n"
          "The list is the table the writer writes /study from (results/study_columns.hpp):\n"
          "what this dlscale writes. With --json it is the export that `dlscale report` reads\n"
          "its /study columns from; the build writes it to results_schema.json, installed beside\n"
          "the report in share/dlscale. docs/results-format.md describes every column.\n\n"
          "Usage: dlscale schema [--json]\n\n"
       << options
       << "\nJSON fields: schema_version, and per column name, type (float64, int64 or string),\n"
          "units (null for none), since_version, minimum, may_be_nan and may_be_infinite (+inf:\n"
          "what a reader accepts) and description.\n\n"
          "Example:\n"
          "  dlscale schema --json | python3 -c 'import json, sys; "
          "print([c[\"name\"] for c in json.load(sys.stdin)[\"study_columns\"]])'\n";
  return text.str();
}

}  // namespace

int schema_command(int argc, char** argv) {
  bool help = false;
  bool json = false;
  po::options_description options("Options", 100, 50);
  // A switch, not a bare option: parse_command_line refuses a bare option's empty value.
  options.add_options()("help,h", po::bool_switch(&help), "show this help and exit")(
      "json", po::bool_switch(&json), "print the columns as JSON, for tools");
  return exit_status_alone([&] {
    parse_command_line(argc, argv, options, po::positional_options_description());
    if (help) {
      fmt::print("{}", help_text(options));
      return 0;
    }
    fmt::print("{}", json ? printers::format_results_schema_json()
                          : printers::format_study_columns_table());
    return 0;
  });
}

}  // namespace dlscale::cli
