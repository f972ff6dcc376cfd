// Output path checks and the write-then-rename protocol.
#include "results/output_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/errors.hpp"
#include "core/host_info.hpp"

namespace dlscale::results {

namespace fs = std::filesystem;

namespace {

fs::path directory_of(const fs::path& path) {
  return path.has_parent_path() ? path.parent_path() : fs::path(".");
}

constexpr std::size_t longest_file_name = 255;  // NAME_MAX of Linux file systems

// ".NAME.partial-HOST-" names every temporary file of NAME written on this host; the name is cut
// so that the whole stays a legal file name however long NAME is.
std::string temporary_prefix_for(const fs::path& path) {
  const std::string suffix = fmt::format(".partial-{}-", host_name());
  const std::size_t room_for_pid = 12;
  std::string name = path.filename().string();
  const std::size_t room = longest_file_name - 1 - suffix.size() - room_for_pid;
  if (name.size() > room) name.resize(room);
  return "." + name + suffix;
}

fs::path temporary_path_for(const fs::path& path) {
  return directory_of(path) / (temporary_prefix_for(path) + std::to_string(getpid()));
}

bool process_is_gone(const std::string& pid_text) {
  int pid = 0;
  const auto [end, error] =
      std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (error != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

int remove_abandoned_temporaries(const fs::path& path) {
  const std::string prefix = temporary_prefix_for(path);
  std::error_code error;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(directory_of(path), error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !process_is_gone(name.substr(prefix.size()))) continue;
    std::error_code ignored;
    if (entry.is_regular_file(ignored) && fs::remove(entry.path(), ignored)) ++removed;
  }
  return removed;
}

void check_free_space(const fs::path& path, std::uint64_t bytes_needed) {
  struct statvfs volume {};
  if (::statvfs(directory_of(path).c_str(), &volume) != 0) return;  // cannot tell: try anyway
  const std::uint64_t free_bytes = std::uint64_t(volume.f_bavail) * volume.f_frsize;
  if (free_bytes < bytes_needed)
    throw UserError(
        fmt::format("--out: '{}' has {:.1f} MiB free; the results need about {:.1f} "
                    "MiB (free some space, or choose another directory)",
                    directory_of(path).string(), free_bytes / 1048576.0, bytes_needed / 1048576.0));
}

void check_output_path(const fs::path& path, bool overwrite, std::string_view option) {
  if (path.empty() || !path.has_filename())
    throw UserError(fmt::format("{}: '{}' is not a file name", option, path.string()));
  std::error_code error;
  // A link is refused even when it dangles: the file would be renamed over the link itself.
  if (fs::is_symlink(fs::symlink_status(path, error)))
    throw UserError(fmt::format("{}: '{}' is a symbolic link; give the path of the file itself",
                                option, path.string()));
  const auto status = fs::status(path, error);
  if (fs::exists(status)) {
    // A rename over a device (/dev/full, /dev/null) would replace it with a regular file.
    if (!fs::is_regular_file(status))
      throw UserError(
          fmt::format("{}: '{}' exists and is not a regular file", option, path.string()));
    if (!overwrite)
      throw UserError(fmt::format(
          "{}: '{}' already exists; pass --overwrite to replace it, or choose another name", option,
          path.string()));
  }
  const fs::path directory = directory_of(path);
  if (!fs::is_directory(directory, error))
    throw UserError(fmt::format("{}: directory '{}' does not exist", option, directory.string()));
  // Creating the real temporary file is the only test that holds for root, ACLs and read-only
  // mounts alike.
  const fs::path probe = temporary_path_for(path);
  const int descriptor = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (descriptor < 0)
    throw UserError(fmt::format("{}: cannot write in directory '{}': {}", option,
                                directory.string(), std::strerror(errno)));
  ::close(descriptor);
  fs::remove(probe, error);
}

void check_output_is_not_an_input(const fs::path& path, const std::vector<fs::path>& inputs,
                                  std::string_view option) {
  for (const auto& input : inputs) {
    std::error_code error;
    if (fs::equivalent(path, input, error))
      throw UserError(
          fmt::format("{}: '{}' is the input file '{}'; writing it would destroy it "
                      "(choose another name)",
                      option, path.string(), input.string()));
  }
}

FileWriteError::FileWriteError(const fs::path& path, int error_number)
    : UserError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(error_number))),
      reason_(std::strerror(error_number)) {}

namespace {

// Writes every byte and syncs them to the device, so that a full disk shows here and not as a
// short file later; errors name `path`, the name the user gave.
void write_file(const fs::path& temporary, std::string_view contents, const fs::path& path) {
  const int descriptor = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor < 0) throw FileWriteError(path, errno);
  std::size_t written = 0;
  while (written < contents.size()) {
    const ssize_t count = ::write(descriptor, contents.data() + written, contents.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      const int write_error = errno;
      ::close(descriptor);
      throw FileWriteError(path, write_error);
    }
    written += std::size_t(count);
  }
  if (::fsync(descriptor) != 0 && errno != EINVAL) {
    const int sync_error = errno;
    ::close(descriptor);
    throw FileWriteError(path, sync_error);
  }
  if (::close(descriptor) != 0) throw FileWriteError(path, errno);
}

}  // namespace

void write_atomically(const fs::path& path, bool overwrite, std::string_view contents) {
  const fs::path temporary = temporary_path_for(path);
  std::error_code ignored;
  try {
    write_file(temporary, contents, path);
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

void write_text_atomically(const fs::path& path, const std::string& text, bool overwrite) {
  write_atomically(path, overwrite, text);
}

}  // namespace dlscale::results
