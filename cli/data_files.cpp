// DLSCALE_DATA_FROM_BIN (share/dlscale as seen from bin/) and DLSCALE_SOURCE_DIR come from CMake.
#include "cli/data_files.hpp"

namespace dlscale::cli {

std::filesystem::path data_file(std::string_view installed, std::string_view in_source) {
  std::error_code error;
  const auto executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const auto beside = executable.parent_path() / DLSCALE_DATA_FROM_BIN / installed;
    if (std::filesystem::exists(beside, error)) return beside.lexically_normal();
  }
  return std::filesystem::path(DLSCALE_SOURCE_DIR) / in_source;
}

}  // namespace dlscale::cli
