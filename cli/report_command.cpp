#include "cli/report_command.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/data_files.hpp"

namespace dlscale::cli {

namespace {

// DLSCALE_PYTHON and DLSCALE_REPORT_SCRIPT in the environment override the built-in choices.
std::string setting(const char* environment_name, const std::string& built_in) {
  const char* value = std::getenv(environment_name);
  return value != nullptr && *value != '\0' ? value : built_in;
}

std::string report_script() {
  return setting("DLSCALE_REPORT_SCRIPT",
                 data_file("dlscale_report.py", "report/dlscale_report.py").string());
}

}  // namespace

int report_command(int argc, char** argv) {
  const std::string python = setting("DLSCALE_PYTHON", DLSCALE_PYTHON);
  const std::string script = report_script();
  if (!std::filesystem::exists(script)) {
    fmt::print(stderr,
               "dlscale: error: the report script '{}' is missing; reinstall dlscale or "
               "set DLSCALE_REPORT_SCRIPT\n",
               script);
    return 2;
  }
  // The report asks this very binary for predictions (--network).
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) setenv("DLSCALE_EXECUTABLE", self.c_str(), 1);
  std::vector<char*> arguments = {const_cast<char*>(python.c_str()),
                                  const_cast<char*>(script.c_str())};
  for (int i = 1; i < argc; ++i) arguments.push_back(argv[i]);
  arguments.push_back(nullptr);
  execv(python.c_str(), arguments.data());
  fmt::print(stderr,
             "dlscale: error: cannot start '{}' for the report: {} (set DLSCALE_PYTHON "
             "to a Python 3 with h5py, pandas and matplotlib)\n",
             python, std::strerror(errno));
  return 2;
}

}  // namespace dlscale::cli
