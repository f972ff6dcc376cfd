// Output path checks and the write-then-rename protocol.
#include "results/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/errors.hpp"

namespace dlscale::results {

namespace fs = std::filesystem;

namespace {

fs::path directory_of(const fs::path& path) {
  return path.has_parent_path() ? path.parent_path() : fs::path(".");
}

fs::path temporary_path_for(const fs::path& path) {
  return directory_of(path) / fmt::format(".{}.partial-{}", path.filename().string(), getpid());
}

}  // namespace

void check_output_path(const fs::path& path, bool overwrite) {
  if (path.empty() || !path.has_filename())
    throw UserError(fmt::format("--out: '{}' is not a file name", path.string()));
  std::error_code error;
  const auto status = fs::status(path, error);
  if (fs::exists(status)) {
    if (!fs::is_regular_file(status))
      throw UserError(fmt::format("--out: '{}' exists and is not a regular file", path.string()));
    if (!overwrite)
      throw UserError(fmt::format(
          "--out: '{}' already exists; pass --overwrite to replace it, or choose another name",
          path.string()));
  }
  const fs::path directory = directory_of(path);
  if (!fs::is_directory(directory, error))
    throw UserError(fmt::format("--out: directory '{}' does not exist", directory.string()));
  // Creating the real temporary file is the only test that holds for root, ACLs and read-only
  // mounts alike.
  const fs::path probe = temporary_path_for(path);
  const int descriptor = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (descriptor < 0)
    throw UserError(fmt::format("--out: cannot write in directory '{}': {}", directory.string(),
                                std::strerror(errno)));
  ::close(descriptor);
  fs::remove(probe, error);
}

void write_atomically(const fs::path& path, bool overwrite,
                      const std::function<void(const fs::path&)>& write) {
  const fs::path temporary = temporary_path_for(path);
  std::error_code ignored;
  try {
    write(temporary);
    if (overwrite) {
      fs::rename(temporary, path);
    } else if (::link(temporary.c_str(), path.c_str()) != 0) {
      // link() fails rather than replace an existing name, unlike rename().
      const int link_error = errno;
      throw UserError(fmt::format("--out: cannot create '{}': {}{}", path.string(),
                                  std::strerror(link_error),
                                  link_error == EEXIST ? " (pass --overwrite to replace it)" : ""));
    } else {
      fs::remove(temporary);
    }
  } catch (...) {
    fs::remove(temporary, ignored);
    throw;
  }
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  write_atomically(path, true, [&](const fs::path& temporary) {
    std::ofstream file(temporary);
    file << text;
    file.close();
    if (!file) throw UserError(fmt::format("cannot write '{}'", path.string()));
  });
}

}  // namespace dlscale::results
