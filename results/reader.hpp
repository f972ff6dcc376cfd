// The results reader: restores a RunRecord from a dlscale HDF5 file (for report, merge, predict
// and the tests). Throws UserError naming the file if it is missing or not a dlscale file.
#pragma once

#include <filesystem>

#include "results/run_record.hpp"

namespace dlscale::results {

RunRecord read_run(const std::filesystem::path& path);

}  // namespace dlscale::results
