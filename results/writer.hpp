// The results writer: stores a ResultsFile (runs and their study) as one self-describing HDF5
// file, laid out as docs/results-format.md describes.
#pragma once

#include <filesystem>
#include <functional>

#include "results/hdf5_check.hpp"
#include "results/study_record.hpp"

namespace dlscale::results {

// Writes `results` to `path` atomically (see output_file.hpp).
void write_results(const ResultsFile& results, const std::filesystem::path& path, bool overwrite);

// Creates a dlscale file atomically: its root attributes (status: see schema::status), then
// whatever write(file) adds (the runs, or a comm sweep).
void write_results_file(const std::filesystem::path& path, bool overwrite, const FileOrigin& origin,
                        std::size_t run_count, const std::string& status,
                        const std::function<void(hid_t file)>& write);

}  // namespace dlscale::results
