// What every subcommand sets up the same way: its log lines ("dlscale: error: ..." from rank 0,
// "dlscale[rank N]: ..." from the others, which speak up only for warnings and errors), how its
// errors become exit statuses, and how a results file records the command that made it.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include <boost/program_options.hpp>

#include "comm/mpi_session.hpp"
#include "core/errors.hpp"
#include "results/study_record.hpp"

namespace dlscale::cli {

void start_command_logging(int rank);

// What every dlscale process does first, whatever its subcommand. A file-size limit (ulimit -f)
// becomes a failed write, told like a full disk, instead of a silent SIGXFSZ. A closed standard
// input or error is reopened on /dev/null, so that no results file is ever given their
// descriptor; a closed standard output is refused, since whatever the command prints would be
// lost. Returns false, having said why on standard error, if the command must not run.
bool prepare_process();

// Runs `command` and returns its exit status. A UserError (agreed on by every rank, see
// comm/collective_agreement.hpp) is logged once by rank 0 and gives 2; any other exception is
// one rank's failure, logged by that rank, and ends the whole job with 1. Output that could not
// be written to standard output (a full disk, /dev/full) gives 2, with one line saying so.
int exit_status_of(const comm::MpiSession& mpi, const std::function<int()>& command);

// The same for a subcommand that runs without MPI (predict, merge): a UserError prints
// "dlscale: error: ..." and gives 2, any other failure 1. Standard output, when not a terminal,
// is kept whole until the end (these commands print one report), so a failed write to it is
// told once, as 2, and never cuts a table in half with an internal error.
int exit_status_alone(const std::function<int()>& command);

// The one-line UserError for a mistake Boost.Program_options reports: its message, and for an
// unknown option the nearest one in `options` ("unrecognised option '--iterations' (did you
// mean '--iters'?)").
UserError option_error(const boost::program_options::error& error,
                       const boost::program_options::options_description& options);

// Boost.Program_options' style for every subcommand, without its guessing of abbreviations: an
// option must be spelled out, so "--out" is never taken for "--output".
int strict_command_line_style();

// The choices of --device or --comm for --help, from their registry's records (name and help):
// "a (help), b (help) or c (help)", or "a, b or c" without the help.
template <typename Record>
std::string listed_choices(std::span<const Record> records, bool with_help) {
  std::string text;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (i > 0) text += i + 1 == records.size() ? " or " : ", ";
    text += records[i].name;
    if (with_help) text += std::string(" (") + records[i].help + ")";
  }
  return text;
}

// Throws UserError for words that are neither options nor their values, for a command that takes
// no positional arguments: the first one may be a mistyped subcommand ("dlscale reprot").
void refuse_stray_arguments(const boost::program_options::parsed_options& parsed);

// Parses argv (argv[0] is skipped) against `options`, with `positional` arguments; a bad option
// becomes a UserError naming it, and so does an option given an empty value (`--json ''`),
// which would otherwise mean the option was not given, silently.
boost::program_options::variables_map parse_command_line(
    int argc, char** argv, const boost::program_options::options_description& options,
    const boost::program_options::positional_options_description& positional);

// The one provenance builder: what made a results file (this build's version and git commit,
// "dlscale SUBCOMMAND ARG ..." and the start time, ISO 8601 UTC to the second). argv excludes
// the subcommand word and argv[0] is the program; an empty subcommand gives "dlscale ARG ...",
// the training benchmark's own form.
results::FileOrigin file_origin(std::string_view subcommand, int argc, char** argv,
                                std::chrono::system_clock::time_point start);

}  // namespace dlscale::cli
