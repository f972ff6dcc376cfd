// The results reader: restores the runs of a dlscale HDF5 file (for report, merge, predict and
// the tests). Reads schema 2 and the single-run schema 1. The study table is not read back: it
// is derived data, and coordinator::analyze_study() recomputes it from the runs.
// Throws UserError naming the file if it is missing, not HDF5, or not a dlscale file.
#pragma once

#include <filesystem>

#include "results/study_record.hpp"

namespace dlscale::results {

ResultsFile read_results(const std::filesystem::path& path);

}  // namespace dlscale::results
