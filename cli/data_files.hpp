// Where dlscale finds the files it ships beside its binary (the report script, the Slurm
// scripts): relative to the running executable, so an installed tree works wherever it is
// moved and with the build and source trees gone; a build tree uses its source tree's copy.
#pragma once

#include <filesystem>
#include <string_view>

namespace dlscale::cli {

// The installed file `installed` (relative to PREFIX/share/dlscale) if it exists beside the
// running binary, else this source tree's `in_source` (relative to the repository root).
std::filesystem::path data_file(std::string_view installed, std::string_view in_source);

}  // namespace dlscale::cli
