// The results Writer: stores a RunRecord as one self-describing HDF5 file.
#pragma once

#include <filesystem>

#include "results/run_record.hpp"

namespace dlscale::results {

// Writes `record` to `path` atomically (see output_file.hpp).
void write_run(const RunRecord& record, const std::filesystem::path& path, bool overwrite);

}  // namespace dlscale::results
