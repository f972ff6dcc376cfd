// Boost.Program_options definitions for `dlscale comm`, the size parser and the sweep's sizes.
// The short option letters are nccl-tests' (-b -e -f -i -n -w), so its users feel at home.
#include "cli/comm_options.hpp"

#include <cctype>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>

#include "cli/command_setup.hpp"
#include "cli/count_list.hpp"
#include "comm/communicator_factory.hpp"
#include "core/errors.hpp"
#include "core/named_records.hpp"

namespace dlscale::cli {

namespace po = boost::program_options;

namespace {

// "cuda with --comm nccl": the backends that need one device, from their records.
std::string devices_backends_need() {
  std::vector<std::string> pairs;
  for (const comm::BackendRecord& backend : comm::backend_records())
    if (backend.only_device)
      pairs.push_back(fmt::format("{} with --comm {}",
                                  kernels::device_record(*backend.only_device).name, backend.name));
  return fmt::format("{}", fmt::join(pairs, ", "));
}

// "allreduce (size: ...; busbw = algbw * 2(n-1)/n), ...": the collectives from their records.
std::string collectives_with_conventions() {
  std::vector<std::string> entries;
  for (const worker::SweptCollective* collective : worker::swept_collectives())
    entries.push_back(fmt::format("{} (size: {}; busbw = algbw * {})", collective->name,
                                  collective->size_meaning, collective->bus_factor_formula));
  return fmt::format("{}", fmt::join(entries, ", "));
}

// Sizes and numbers are read as text and signed 64-bit, so "-3" and "1.5M" reach our checks
// instead of wrapping or failing with a generic message; lists of names as text.
struct RawValues {
  std::string minimum_bytes = "8", maximum_bytes = "64M", step_bytes;
  long long step_factor = 0, iterations = 0, warmup = 0;
  std::string collectives = worker::swept_allreduce.name;
  std::string dtypes = comm::comm_dtype_names(comm::GradientDtype::fp32);
};

po::options_description option_descriptions(CommOptions& options, RawValues& raw) {
  const CommOptions defaults;
  po::options_description sizes("Message sizes");
  // clang-format off
  sizes.add_options()("minbytes,b", po::value(&raw.minimum_bytes)->default_value(raw.minimum_bytes),
                      "smallest message, in bytes (K, M, G suffixes are powers of 1024)")(
      "maxbytes,e", po::value(&raw.maximum_bytes)->default_value(raw.maximum_bytes),
      "largest message, in bytes")(
      "stepfactor,f", po::value(&raw.step_factor),
      "multiply the size by this whole number >= 2 from one message to the next (default 2)")(
      "stepbytes,i", po::value(&raw.step_bytes),
      "add this many bytes (at least one element of every --dtype) instead of multiplying");
  // clang-format on

  po::options_description measuring("Measuring");
  // clang-format off
  measuring.add_options()
      ("collective", po::value(&raw.collectives)->default_value(raw.collectives),
       ("the collectives to sweep, comma-separated, a table each; sizes count what nccl-tests "
        "counts: " + collectives_with_conventions()).c_str())
      ("dtype", po::value(&raw.dtypes)->default_value(raw.dtypes),
       ("the element types on the wire, comma-separated, a table each: " +
        fmt::format("{}", fmt::join(comm::comm_dtype_names.all(), " or ")) +
        " (bf16: roundings of the floats, as --grad-dtype bf16 sends gradients)").c_str())
      ("iters,n", po::value(&raw.iterations)->default_value(defaults.measured_iterations),
       "measured calls per size, out of place and again in place")
      ("warmup,w", po::value(&raw.warmup)->default_value(defaults.warmup_iterations),
       "warm-up calls per size, checked but not timed into the statistics")
      ("comm", po::value(&options.comm)->default_value(defaults.comm),
       ("backend, the same one training uses: " +
        listed_choices(comm::backend_records(), false)).c_str())
      ("device", po::value(&options.device),
       ("where the buffers live: " + listed_choices(kernels::device_records(), false) +
        " (a GPU: each rank's); the default is the device the backend needs (" +
        devices_backends_need() + "), else " +
        kernels::device_record(kernels::DeviceKind::cpu).name +
        ", and a GPU with a host backend measures staging through the host").c_str());
  // clang-format on

  po::options_description output("Output");
  // clang-format off
  output.add_options()(
      "out,o", po::value(&options.output_path),
      "results file (HDF5, named *.h5; default dlscale-comm-NPr-TIME.h5 in the current "
      "directory)")("overwrite", po::bool_switch(&options.overwrite),
                    "replace an existing results file")("help,h", "show this help and exit");
  // clang-format on
  po::options_description all;
  all.add(sizes).add(measuring).add(output);
  return all;
}

void check_values(CommOptions& options, const RawValues& raw, const po::variables_map& values) {
  if (options.device.empty()) {
    // The device the backend needs, else the CPU; an unknown backend is refused later.
    kernels::DeviceKind device = kernels::DeviceKind::cpu;
    for (const comm::BackendRecord& backend : comm::backend_records())
      if (backend.name == options.comm && backend.only_device) device = *backend.only_device;
    options.device = kernels::device_record(device).name;
  }
  options.collectives = parse_name_list(
      raw.collectives, "--collective",
      [](const std::string& name) { return worker::find_swept_collective(name).collective; });
  options.dtypes = parse_name_list(raw.dtypes, "--dtype", [](const std::string& name) {
    return enum_named(comm::comm_dtype_names, name, "--dtype", "dtype");
  });
  // Every size must hold one element of every dtype.
  const comm::GradientDtype widest =
      *std::max_element(options.dtypes.begin(), options.dtypes.end(), [](auto a, auto b) {
        return comm::sent_bytes_per_element(a) < comm::sent_bytes_per_element(b);
      });
  const std::uint64_t element_bytes = comm::sent_bytes_per_element(widest);
  const char* const element_name = comm::comm_dtype_names(widest);
  options.minimum_bytes = parse_byte_size(raw.minimum_bytes, "-b/--minbytes");
  options.maximum_bytes = parse_byte_size(raw.maximum_bytes, "-e/--maxbytes");
  if (options.minimum_bytes < element_bytes)
    throw UserError(fmt::format("-b/--minbytes must be at least {} bytes (one {} element), got {}",
                                element_bytes, element_name, options.minimum_bytes));
  if (options.minimum_bytes > options.maximum_bytes)
    throw UserError(fmt::format("-b/--minbytes ({} bytes) is larger than -e/--maxbytes ({} bytes)",
                                options.minimum_bytes, options.maximum_bytes));
  const bool adds = values.count("stepbytes") > 0;
  if (adds && values.count("stepfactor"))
    throw UserError("give -f/--stepfactor or -i/--stepbytes, not both");
  if (adds) {
    options.step_kind = CommOptions::Step::add;
    options.step = parse_byte_size(raw.step_bytes, "-i/--stepbytes");
    if (options.step < element_bytes)
      throw UserError(
          fmt::format("-i/--stepbytes must be at least {} bytes (one {} element), got {}",
                      element_bytes, element_name, options.step));
  } else if (values.count("stepfactor")) {
    if (raw.step_factor < 2)
      throw UserError(
          fmt::format("-f/--stepfactor must be a whole number of at least 2, got {} "
                      "(for sizes growing by a fixed amount, use -i/--stepbytes)",
                      raw.step_factor));
    options.step = std::uint64_t(raw.step_factor);
  }
  if (raw.iterations < 1 || raw.iterations > std::numeric_limits<int>::max())
    throw UserError(fmt::format("-n/--iters must be a positive integer, got {}", raw.iterations));
  options.measured_iterations = int(raw.iterations);
  if (raw.warmup < 0 || raw.warmup > std::numeric_limits<int>::max())
    throw UserError(
        fmt::format("-w/--warmup must be zero or a positive integer, got {}", raw.warmup));
  options.warmup_iterations = int(raw.warmup);
  if (options.output_path.empty() && values.count("out"))
    throw UserError("--out must not be empty");
  // nccl-tests users type `-o sum` for the reduction; here it would name the results file.
  const auto ends_with = [&](std::string_view suffix) {
    return std::string_view(options.output_path).ends_with(suffix);
  };
  if (!options.output_path.empty() && !ends_with(".h5") && !ends_with(".hdf5"))
    throw UserError(fmt::format(
        "-o/--out '{}': the results file name must end in .h5 (in nccl-tests -o picks the "
        "reduction; dlscale comm always sums, as data-parallel training does)",
        options.output_path));
  if (sweep_sizes_bytes(options).size() > max_sweep_sizes)
    throw UserError(
        fmt::format("the sweep would have more than {} message sizes; use a larger "
                    "-f/--stepfactor or -i/--stepbytes",
                    max_sweep_sizes));
}

}  // namespace

std::uint64_t parse_byte_size(std::string_view text, std::string_view option) {
  const auto refuse = [&] {
    return UserError(
        fmt::format("{}: '{}' is not a size in bytes (a whole number, optionally "
                    "followed by K, M or G, e.g. 64M)",
                    option, text));
  };
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits + 1 < text.size()) throw refuse();
  int shift = 0;
  if (digits < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        throw refuse();
    }
  }
  std::uint64_t number = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const auto digit = std::uint64_t(text[i] - '0');
    if (number > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) throw refuse();
    number = number * 10 + digit;
  }
  if (number > (std::numeric_limits<std::uint64_t>::max() >> shift)) throw refuse();
  return number << shift;
}

CommOptions parse_comm_options(const std::vector<std::string>& arguments) {
  CommOptions options;
  RawValues raw;
  const po::options_description descriptions = option_descriptions(options, raw);
  po::variables_map values;
  try {
    const auto parsed = po::command_line_parser(arguments)
                            .options(descriptions)
                            .style(strict_command_line_style())
                            .run();
    refuse_stray_arguments(parsed);
    po::store(parsed, values);
    po::notify(values);
  } catch (const po::error& error) {
    throw option_error(error, descriptions);
  }
  if (values.count("help"))
    options.action = CommOptions::Action::show_help;
  else
    check_values(options, raw, values);
  return options;
}

std::vector<std::uint64_t> sweep_sizes_bytes(const CommOptions& options) {
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t bytes = options.minimum_bytes; bytes <= options.maximum_bytes;) {
    sizes.push_back(bytes);
    if (sizes.size() > max_sweep_sizes) break;  // enough to tell the caller it is too many
    // Stop before the next size could pass maximum_bytes, which also keeps it from overflowing.
    if (options.step_kind == CommOptions::Step::multiply) {
      if (bytes > options.maximum_bytes / options.step) break;
      bytes *= options.step;
    } else {
      if (options.step > options.maximum_bytes - bytes) break;
      bytes += options.step;
    }
  }
  return sizes;
}

std::string comm_help_text() {
  CommOptions options;
  RawValues raw;
  po::options_description visible(100, 50);
  visible.add(option_descriptions(options, raw));
  std::ostringstream text;
  text
      << "dlscale comm: how fast are the collectives of data parallelism between these ranks?\n"
         "Like nccl-tests, it sweeps message sizes and times each collective (--collective) in\n"
         "each dtype (--dtype) out of place and in place, through the communicator that training\n"
         "uses. Every result is checked against the exact one. Rank 0 prints a table per\n"
         "collective and dtype, fits the latency-bandwidth model t(m) = a + b*m to each and\n"
         "writes everything to one HDF5 file (whose float allreduce `dlscale predict` reads).\n\n"
         "Usage: mpirun -np N dlscale comm [options]"
      << visible
      << "\nSizes are nccl-tests': the whole buffer for reduce_scatter (the input), all_gather "
         "(the\n"
         "output) and alltoall (what each rank sends), the message for allreduce and broadcast.\n"
         "Each is rounded down to whole elements (4 bytes for float, 2 for bf16: -b 10 sends 2\n"
         "floats), and for reduce_scatter, all_gather and alltoall to whole elements per rank.\n"
         "\nExamples:\n"
         "  mpirun -np 2 dlscale comm -b 8 -e 64M -f 2 --out comm.h5\n"
         "      8 B, 16 B, 32 B, ..., 64 MiB: 24 sizes, each 5 warm-up + 20 measured calls\n"
         "  mpirun -np 4 dlscale comm --collective reduce_scatter,all_gather --dtype float,bf16\n"
         "      ZeRO's two collectives, in float and in bf16: four tables\n"
         "  mpirun -np 4 dlscale comm --minbytes=1M --maxbytes=8M --stepbytes=1M -n 50\n"
         "      1, 2, ..., 8 MiB, 50 measured calls each\n"
         "  mpirun -np 8 dlscale comm --comm nccl -b 8 -e 1G -f 2   (one GPU per rank)\n"
         "\nColumns, out of place and then in place: the p50, p95, mean, min and max of the\n"
         "measured calls, each call timed at its slowest rank (microseconds); algbw = size / time\n"
         "and busbw = algbw * the collective's factor, at the p50 time, in GB/s (10^9 bytes/s);\n"
         "busbw is comparable across rank counts. #wrong counts elements that differed from the\n"
         "exact result. Under each table: nccl-tests' Avg bus bandwidth and the fits.\n"
         "\nExit status: 0 on success, 2 for a bad option or input, 1 for a failure while "
         "running,\n"
         "including any wrong result (then no results file is written).\n"
         "docs/communication.md explains the tables, the fits and the file.\n";
  return text.str();
}

}  // namespace dlscale::cli
