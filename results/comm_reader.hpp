// Reads a `dlscale comm` file back into a CommRecord: for `dlscale predict` (which needs the
// fitted alpha and beta), reports and the tests. Throws UserError naming the file if it is
// missing, not a dlscale file of schema 2, or has no /comm group.
#pragma once

#include <filesystem>

#include "results/comm_record.hpp"

namespace dlscale::results {

CommRecord read_comm(const std::filesystem::path& path);

}  // namespace dlscale::results
