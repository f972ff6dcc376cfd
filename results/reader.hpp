// The results reader: restores the runs of a dlscale HDF5 file (for report, merge, predict and
// the tests). Reads schema 2 and the single-run schema 1. The study table is not read back: it
// is derived data, and analysis::analyze_study() recomputes it from the runs.
// Throws UserError naming the file if it is missing, not HDF5, or not a dlscale file.
#pragma once

#include <filesystem>
#include <string>

#include "results/hdf5_check.hpp"
#include "results/study_record.hpp"

namespace dlscale::results {

ResultsFile read_results(const std::filesystem::path& path);

// A dlscale file opened for reading, after the checks every reader makes.
struct OpenedResultsFile {
  Hdf5Handle file;
  long long version;  // schema_version
};
OpenedResultsFile open_results_file(const std::filesystem::path& path);

// Throws UserError "damaged results file: WHAT": every reader's one way to refuse a file.
[[noreturn]] void damaged(const std::string& what);

}  // namespace dlscale::results
