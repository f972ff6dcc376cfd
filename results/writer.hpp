// The results writer: stores a ResultsFile (runs and their study) as one self-describing HDF5
// file, laid out as docs/results-format.md describes.
#pragma once

#include <filesystem>

#include "results/hdf5_check.hpp"
#include "results/study_record.hpp"

namespace dlscale::results {

// Writes `results` to `path` atomically (see output_file.hpp).
void write_results(const ResultsFile& results, const std::filesystem::path& path, bool overwrite);

// The root attributes every dlscale file starts with, for writers of other content (comm).
void write_origin_attributes(hid_t file, const FileOrigin& origin, std::size_t run_count);

}  // namespace dlscale::results
