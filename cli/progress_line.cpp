#include "cli/progress_line.hpp"

#include <cstdio>

#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace dlscale::cli {

namespace {
constexpr auto terminal_interval = std::chrono::milliseconds(200);
constexpr auto log_interval = std::chrono::seconds(5);
}  // namespace

ProgressLine::ProgressLine(bool enabled)
    : enabled_(enabled), terminal_(enabled && isatty(STDERR_FILENO) == 1),
      last_shown_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() { end_point(); }

void ProgressLine::begin_point(int point, int points, int ranks, int iterations) {
  point_label_ = points > 1 ? fmt::format("point {}/{} ({} rank{}): ", point, points, ranks,
                                          ranks == 1 ? "" : "s")
                            : "";
  iterations_ = iterations;
}

void ProgressLine::iteration_done(int iteration, double step_seconds) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_shown_ < (terminal_ ? terminal_interval : log_interval) &&
      iteration + 1 < iterations_)
    return;
  last_shown_ = now;
  const int remaining = iterations_ - iteration - 1;
  const std::string text =
      fmt::format("{}iteration {}/{}, step {:.3f} s, ETA {:.0f} s", point_label_, iteration + 1,
                  iterations_, step_seconds, remaining * step_seconds);
  if (terminal_) {
    // \r and erase-to-end-of-line redraw the same line.
    std::fprintf(stderr, "\r%s\x1b[K", text.c_str());
    std::fflush(stderr);
    line_open_ = true;
  } else if (remaining > 0) {
    spdlog::info("{}", text);
  }
}

void ProgressLine::end_point() {
  if (!line_open_) return;
  std::fputs("\n", stderr);
  line_open_ = false;
}

}  // namespace dlscale::cli
