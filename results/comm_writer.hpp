// The comm results Writer: stores a CommRecord (one `dlscale comm` sweep) as an HDF5 file of
// results schema 2 with a /comm group; docs/communication.md describes every field.
#pragma once

#include <filesystem>

#include "results/comm_record.hpp"

namespace dlscale::results {

// Writes `record` to `path` atomically (see output_file.hpp).
void write_comm(const CommRecord& record, const std::filesystem::path& path, bool overwrite);

}  // namespace dlscale::results
