// Options of `dlscale comm`, parsed and validated here, so nothing past the CLI layer sees an
// unchecked value; also the message sizes of the sweep they describe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator_factory.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::cli {

struct CommOptions {
  enum class Action { sweep, show_help };
  Action action = Action::sweep;

  // The tables: each collective in each dtype, in the order given.
  std::vector<worker::Collective> collectives = {worker::Collective::allreduce};
  std::vector<comm::GradientDtype> dtypes = {comm::GradientDtype::fp32};

  // Message sizes: minimum_bytes, then each size times step (multiply) or plus step (add), up to
  // maximum_bytes. Each table rounds them down to its rows (worker::table_element_counts).
  enum class Step { multiply, add };
  std::uint64_t minimum_bytes = 8;
  std::uint64_t maximum_bytes = std::uint64_t(64) << 20;
  Step step_kind = Step::multiply;
  std::uint64_t step = 2;  // the factor (>= 2) or the bytes (>= one element of every dtype)

  int measured_iterations = 20;
  int warmup_iterations = 5;
  std::string comm = comm::backend_record(comm::Backend::mpi).name;
  std::string device;       // empty until checked: then cuda for nccl, cpu otherwise
  std::string output_path;  // empty: a default name made from the rank count and time
  bool overwrite = false;
};

// The most sizes one sweep may have, so a mistyped step cannot start a sweep that runs for days.
inline constexpr std::size_t max_sweep_sizes = 1024;

// "8", "64K", "64M", "1G": a whole number of bytes with an optional suffix K, M or G (either case)
// meaning 2^10, 2^20 or 2^30. Throws UserError naming `option` for anything else.
std::uint64_t parse_byte_size(std::string_view text, std::string_view option);

// `arguments` excludes the program name and subcommand. Throws UserError naming the option.
CommOptions parse_comm_options(const std::vector<std::string>& arguments);

// The sizes of the sweep in bytes, smallest first, as the options make the sequence.
std::vector<std::uint64_t> sweep_sizes_bytes(const CommOptions& options);

std::string comm_help_text();

}  // namespace dlscale::cli
