#include "coordinator/progress_line.hpp"

#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace dlscale::coordinator {

namespace {

constexpr auto terminal_interval = std::chrono::milliseconds(200);
constexpr auto log_interval = std::chrono::seconds(5);

// Under mpirun a rank's stdout is a pseudo-terminal that Open MPI made, whatever mpirun's own
// output is, and its stderr a pipe. mpirun, the parent of the ranks on its host, shows whether
// a person is watching: its stderr is then a terminal device.
bool parent_writes_to_terminal() {
  std::error_code error;
  const auto target = std::filesystem::read_symlink(fmt::format("/proc/{}/fd/2", getppid()), error);
  const std::string device = target.string();
  return !error && (device.rfind("/dev/pts/", 0) == 0 || device.rfind("/dev/tty", 0) == 0);
}

std::FILE* terminal_for_progress() {
  if (isatty(STDERR_FILENO) == 1) return stderr;
  if (isatty(STDOUT_FILENO) == 1 && parent_writes_to_terminal()) return stdout;
  return nullptr;
}

}  // namespace

ProgressLine::ProgressLine(bool enabled)
    : enabled_(enabled),
      terminal_(enabled ? terminal_for_progress() : nullptr),
      last_shown_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() { end_point(); }

void ProgressLine::begin_point(int point, int points, int ranks, int iterations) {
  point_label_ = points > 1 ? fmt::format("point {}/{} ({} rank{}): ", point, points, ranks,
                                          ranks == 1 ? "" : "s")
                            : "";
  iterations_ = iterations;
}

void ProgressLine::show_activity(const std::string& text) {
  if (!enabled_) return;
  last_shown_ = std::chrono::steady_clock::now();
  if (terminal_ == nullptr) {
    spdlog::info("{}{}", point_label_, text);
    return;
  }
  std::fprintf(terminal_, "\r%s%s\x1b[K", point_label_.c_str(), text.c_str());
  std::fflush(terminal_);
  line_open_ = true;
}

void ProgressLine::iteration_done(int iteration, double step_seconds) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_shown_ < (terminal_ != nullptr ? terminal_interval : log_interval) &&
      iteration + 1 < iterations_)
    return;
  last_shown_ = now;
  const int remaining = iterations_ - iteration - 1;
  const std::string text =
      fmt::format("{}iteration {}/{}, step {:.3f} s, ETA {:.0f} s", point_label_, iteration + 1,
                  iterations_, step_seconds, remaining * step_seconds);
  if (terminal_ != nullptr) {
    // \r and erase-to-end-of-line redraw the same line.
    std::fprintf(terminal_, "\r%s\x1b[K", text.c_str());
    std::fflush(terminal_);
    line_open_ = true;
  } else if (remaining > 0) {
    spdlog::info("{}", text);
  }
}

void ProgressLine::end_point() {
  if (!line_open_) return;
  std::fputs("\n", terminal_);
  std::fflush(terminal_);
  line_open_ = false;
}

}  // namespace dlscale::coordinator
