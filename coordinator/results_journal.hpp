// The results file of a training launch, kept current on disk: its name is reserved before any
// training, and after every point the whole file is rewritten (atomically) with what is finished,
// so a job that is killed, stalls or runs out of time keeps every completed point. Rank 0 only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>

#include "results/study_record.hpp"

namespace dlscale::coordinator {

class ResultsJournal {
 public:
  // Checks the space, removes temporaries that killed writers left, and creates `path` holding no
  // runs yet, status "running". Throws UserError, before any training, if `path` exists (without
  // overwrite), cannot be written, or its disk has less than `expected_bytes` free.
  ResultsJournal(std::filesystem::path path, bool overwrite, results::FileOrigin origin,
                 std::uint64_t expected_bytes);

  // Each adds to the file and rewrites it, status "running".
  void add_run(results::RunRecord run);
  // `settings`: the launch's, which the file records with its failed points.
  void add_failed_point(results::FailedPoint point, const results::RunConfiguration& settings);
  void add_node_sharing_probe(results::NodeSharingProbe probe);

  // The last write: the study of the complete runs, and `status` ("complete", or
  // "interrupted: WHY"). Returns the file as written.
  const results::ResultsFile& finish(const std::string& status);

  // For a thread that ends the process next (the stall watchdog): writes `status` and keeps the
  // journal locked, so no later write can start. Never throws. Returns where the file is.
  std::filesystem::path finish_for_exit(const std::string& status) noexcept;

  // For a launch that ends on an error (a point its backend cannot serve): removes the file where
  // it holds nothing yet, or writes status "interrupted: WHY" and keeps what it holds. Returns
  // where the file is kept, or an empty path when it was removed.
  std::filesystem::path abandon(const std::string& why);

  // Where the file is: `path`, or the name it was rescued to when `path` could not be written.
  std::filesystem::path location() const;
  bool rescued() const;

 private:
  void save();  // under mutex_

  mutable std::mutex mutex_;
  std::filesystem::path path_;
  bool rescued_ = false;
  results::ResultsFile results_;
};

// What the results file needs on disk for `points` points of at most `ranks` ranks and
// `iterations` iterations each: the per-iteration timings, a margin per point for attributes and
// sampled series, and room for the next version beside the current one while it is written.
std::uint64_t expected_results_bytes(int points, int ranks, int iterations);

}  // namespace dlscale::coordinator
