// Logger and provenance set-up shared by the subcommands.
#include "cli/command_setup.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/build_info.hpp"
#include "core/errors.hpp"
#include "core/nearest_name.hpp"
#include "core/printable_text.hpp"

namespace dlscale::cli {

namespace {

// Every error is one line, whatever text from files, options or libraries it quotes.

// A failure that is not the user's: what a user can do about it, in one line. The standard
// library's own words ("std::bad_alloc", "vector::_M_range_check: ...") mean nothing to them.
std::string describe_failure(const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr)
    return "out of memory: this process could not allocate what it needed (lower --batch, use "
           "fewer ranks per node, or free memory)";
  if (dynamic_cast<const std::logic_error*>(&error) != nullptr)
    return fmt::format("internal error, please report it with the command line: {}",
                       printable(error.what()));
  return printable(error.what());
}

bool descriptor_is_open(int descriptor) { return ::fcntl(descriptor, F_GETFD) != -1; }

// Flushes standard output; false, having said why on standard error, if what the command
// printed could not be written.
bool standard_output_written() {
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return true;
  const int write_error = errno;
  std::fprintf(stderr, "dlscale: error: cannot write to standard output: %s\n",
               std::strerror(write_error));
  return false;
}

}  // namespace

bool prepare_process() {
  std::signal(SIGXFSZ, SIG_IGN);
  for (const int descriptor : {STDIN_FILENO, STDERR_FILENO})
    if (!descriptor_is_open(descriptor)) {
      const int null_device = ::open("/dev/null", O_RDWR);
      if (null_device >= 0 && null_device != descriptor) {
        ::dup2(null_device, descriptor);
        ::close(null_device);
      }
    }
  if (descriptor_is_open(STDOUT_FILENO)) return true;
  std::fprintf(stderr,
               "dlscale: error: standard output is closed; redirect it to a file or "
               "to /dev/null\n");
  return false;
}

void start_command_logging(int rank) {
  auto logger = spdlog::stderr_color_mt("dlscale");
  logger->set_pattern(rank == 0 ? "dlscale: %^%l%$: %v"
                                : fmt::format("dlscale[rank {}]: %^%l%$: %v", rank));
  logger->set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

int exit_status_of(const comm::MpiSession& mpi, const std::function<int()>& command) {
  try {
    const int status = command();
    return standard_output_written() ? status : 2;
  } catch (const UserError& error) {
    // Agreed errors reach every rank; rank 0 speaks for all of them.
    if (mpi.world_rank() == 0) spdlog::error("{}", printable(error.what()));
    return 2;
  } catch (const std::exception& error) {
    // A failure on one rank alone: the others may be inside a collective, so end the job.
    spdlog::error("{}", describe_failure(error));
    if (mpi.world_size() > 1) mpi.abort_job(1);
    return 1;
  }
}

int exit_status_alone(const std::function<int()>& command) {
  // glibc takes a buffer size only with the buffer itself; this one lives as long as stdout.
  static char report_buffer[1 << 20];
  if (!::isatty(STDOUT_FILENO)) std::setvbuf(stdout, report_buffer, _IOFBF, sizeof report_buffer);
  try {
    const int status = command();
    return standard_output_written() ? status : 2;
  } catch (const UserError& error) {
    fmt::print(stderr, "dlscale: error: {}\n", printable(error.what()));
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "dlscale: error: {}\n", describe_failure(error));
    return 1;
  }
}

UserError option_error(const boost::program_options::error& error,
                       const boost::program_options::options_description& options) {
  namespace po = boost::program_options;
  const auto* unknown = dynamic_cast<const po::unknown_option*>(&error);
  if (unknown == nullptr) return UserError(error.what());
  std::vector<std::string> known;
  for (const auto& option : options.options())
    if (!option->long_name().empty()) known.push_back("--" + option->long_name());
  std::string typed = unknown->get_option_name();
  if (!typed.starts_with("-")) typed = "--" + typed;
  return UserError(error.what() + did_you_mean(typed, known));
}

int strict_command_line_style() {
  namespace style = boost::program_options::command_line_style;
  return style::default_style & ~style::allow_guessing;
}

void refuse_stray_arguments(const boost::program_options::parsed_options& parsed) {
  namespace po = boost::program_options;
  const auto strays = po::collect_unrecognized(parsed.options, po::include_positional);
  if (strays.empty()) return;
  const bool first_word = !parsed.options.empty() && parsed.options.front().position_key == 0;
  if (first_word)
    throw UserError(
        fmt::format("unknown subcommand '{}' (subcommands: run, comm, report, merge, "
                    "predict, slurm, schema; see dlscale --help)",
                    strays.front()));
  throw UserError(
      fmt::format("unexpected argument '{}': this command takes options only", strays.front()));
}

boost::program_options::variables_map parse_command_line(
    int argc, char** argv, const boost::program_options::options_description& options,
    const boost::program_options::positional_options_description& positional) {
  namespace po = boost::program_options;
  po::variables_map values;
  try {
    po::store(po::command_line_parser(argc, argv)
                  .options(options)
                  .positional(positional)
                  .style(strict_command_line_style())
                  .run(),
              values);
    po::notify(values);
  } catch (const po::error& error) {
    throw option_error(error, options);
  }
  for (const auto& [name, value] : values) {
    const auto* text = boost::any_cast<std::string>(&value.value());
    const bool positional_argument =
        positional.max_total_count() > 0 && positional.name_for_position(0) == name;
    // A switch such as --help takes no value: boost stores an empty string for it.
    const auto* option = options.find_nothrow(name, false);
    const bool takes_a_value = option != nullptr && option->semantic()->max_tokens() > 0;
    if (text != nullptr && text->empty() && !value.defaulted() && !positional_argument &&
        takes_a_value)
      throw UserError(fmt::format("--{} must not be empty", name));
  }
  return values;
}

results::FileOrigin file_origin(std::string_view subcommand, int argc, char** argv,
                                std::chrono::system_clock::time_point start) {
  std::string line = subcommand.empty() ? "dlscale" : fmt::format("dlscale {}", subcommand);
  for (int i = 1; i < argc; ++i) line += fmt::format(" {}", argv[i]);
  return {build_info::version, build_info::git_commit, line,
          fmt::format("{:%FT%TZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(start)))};
}

}  // namespace dlscale::cli
