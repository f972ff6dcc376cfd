// Every write goes through results::write_results (a temporary file renamed into place), so the
// file on disk is always a whole, readable results file.
#include "coordinator/results_journal.hpp"

#include <unistd.h>

#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "analysis/scaling_study.hpp"
#include "core/errors.hpp"
#include "core/phases.hpp"
#include "results/output_file.hpp"
#include "results/schema.hpp"
#include "results/writer.hpp"

namespace dlscale::coordinator {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t margin_bytes_per_point = std::uint64_t(1) << 20;
constexpr std::uint64_t most_layers = 256;  // top-level layers: ResNet-50 has about 60

// What a user can act on in a failed write: the system's reason ("No space left on device") when
// the disk refused the bytes, else the first line of what failed.
std::string reason_of_failure(const std::exception& error) {
  if (const auto* refused = dynamic_cast<const results::FileWriteError*>(&error))
    return refused->reason();
  const std::string text = error.what();
  return text.substr(0, text.find('\n'));
}

}  // namespace

std::uint64_t expected_results_bytes(int points, int ranks, int iterations) {
  // Per iteration and rank: the phases, communication, loss, iteration end and each layer.
  const std::uint64_t values =
      std::uint64_t(iterations) * std::uint64_t(ranks) * (phase_count + 3 + most_layers);
  const std::uint64_t file_bytes = std::uint64_t(points) * (values * 8 + margin_bytes_per_point);
  return 2 * file_bytes;
}

ResultsJournal::ResultsJournal(fs::path path, bool overwrite, results::FileOrigin origin,
                               std::uint64_t expected_bytes)
    : path_(std::move(path)) {
  results_.origin = std::move(origin);
  results_.status = results::schema::status_running;
  if (const int removed = results::remove_abandoned_temporaries(path_))
    spdlog::info("removed {} temporary file(s) of '{}' left by killed runs", removed,
                 path_.string());
  results::check_free_space(path_, expected_bytes);
  try {
    results::write_results(results_, path_, overwrite);
  } catch (const LibraryError& error) {
    throw UserError(
        fmt::format("--out: cannot write '{}': {}", path_.string(), reason_of_failure(error)));
  }
}

void ResultsJournal::add_run(results::RunRecord run) {
  const std::lock_guard lock(mutex_);
  results_.runs.push_back(std::move(run));
  save();
}

void ResultsJournal::add_failed_point(results::FailedPoint point,
                                      const results::RunConfiguration& settings) {
  const std::lock_guard lock(mutex_);
  results_.failed_points.push_back(std::move(point));
  results_.failed_points_configuration = settings;
  save();
}

void ResultsJournal::add_node_sharing_probe(results::NodeSharingProbe probe) {
  const std::lock_guard lock(mutex_);
  results_.node_sharing_probes.push_back(probe);
  save();
}

const results::ResultsFile& ResultsJournal::finish(const std::string& status) {
  const std::lock_guard lock(mutex_);
  results_.status = status;
  save();
  return results_;
}

fs::path ResultsJournal::finish_for_exit(const std::string& status) noexcept {
  mutex_.lock();  // held until the process ends
  try {
    results_.status = status;
    save();
  } catch (...) {
    // save() reports what it could not write; the caller ends the process either way.
  }
  return path_;
}

fs::path ResultsJournal::abandon(const std::string& why) {
  const std::lock_guard lock(mutex_);
  if (results_.runs.empty() && results_.failed_points.empty() &&
      results_.node_sharing_probes.empty()) {
    std::error_code ignored;
    fs::remove(path_, ignored);
    return {};
  }
  results_.status = "interrupted: " + why;
  save();
  return path_;
}

fs::path ResultsJournal::location() const {
  const std::lock_guard lock(mutex_);
  return path_;
}

bool ResultsJournal::rescued() const {
  const std::lock_guard lock(mutex_);
  return rescued_;
}

void ResultsJournal::save() {
  // The study covers the runs that ran to the end; a partial run is kept beside it, marked.
  std::vector<results::RunRecord> complete;
  for (const auto& run : results_.runs)
    if (run.partial_reason.empty()) complete.push_back(run);
  results_.study.reset();
  if (!complete.empty()) results_.study = analysis::analyze_study(complete);
  try {
    results::write_results(results_, path_, true);
    return;
  } catch (const std::exception& error) {
    if (rescued_) throw;
    // Measured results are not thrown away because their file cannot be written: they go where
    // they can, under a name the user is told.
    const fs::path rescue =
        fs::temp_directory_path() /
        fmt::format("dlscale-rescued-{}-{}", getpid(), path_.filename().string().substr(0, 150));
    try {
      results::write_results(results_, rescue, false);
    } catch (const std::exception& rescue_error) {
      throw std::runtime_error(fmt::format("cannot write the results to '{}' ({}) nor to '{}' ({})",
                                           path_.string(), reason_of_failure(error),
                                           rescue.string(), reason_of_failure(rescue_error)));
    }
    spdlog::error("cannot write '{}' ({}): the results are kept in '{}' instead", path_.string(),
                  reason_of_failure(error), rescue.string());
    path_ = rescue;
    rescued_ = true;
  }
}

}  // namespace dlscale::coordinator
