// Rank 0's progress on long runs: on a terminal, one live line (sweep point, iteration, current
// step time, ETA) redrawn in place; otherwise (a batch job's log) a log line every few seconds.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace dlscale::coordinator {

class ProgressLine {
 public:
  // Only an enabled instance (rank 0) writes anything.
  explicit ProgressLine(bool enabled);
  ~ProgressLine();

  // A new sweep point (1-based `point` of `points`) of `ranks` ranks and `iterations` iterations.
  void begin_point(int point, int points, int ranks, int iterations);
  // What the point does before its first iteration, and what it costs, where that takes long
  // enough to wonder about (the node-sharing probe): the live line, or a log line.
  void show_activity(const std::string& text);
  void iteration_done(int iteration, double step_seconds);
  // Ends the live line, so that what follows starts on a clean line.
  void end_point();

 private:
  bool enabled_;
  // Where the live line goes: stderr if it is a terminal; under mpirun in a terminal, stdout
  // (see terminal_for_progress); otherwise none, and log lines instead.
  std::FILE* terminal_;
  std::string point_label_;
  int iterations_ = 0;
  std::chrono::steady_clock::time_point last_shown_;
  bool line_open_ = false;
};

}  // namespace dlscale::coordinator
