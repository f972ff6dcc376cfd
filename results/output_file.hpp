// Results files are never clobbered and never half-written: the file is built under a temporary
// name in the same directory and renamed into place only when complete.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.hpp"

namespace dlscale::results {

// Checked before training starts, so a bad path costs the user seconds, not a run. Throws
// UserError, naming `option`, if the path is a symbolic link, exists and is not a regular file
// (a device is never replaced), exists and overwrite is false, or its directory is missing or
// not writable.
void check_output_path(const std::filesystem::path& path, bool overwrite,
                       std::string_view option = "--out");

// Throws UserError, naming `option`, if `path` names the same file as one of `inputs` (by any
// spelling or hard link): writing it would destroy what is being read, so even --overwrite does
// not allow it. Inputs that do not exist are passed over.
void check_output_is_not_an_input(const std::filesystem::path& path,
                                  const std::vector<std::filesystem::path>& inputs,
                                  std::string_view option);

// Removes the temporary files of `path` that processes on this host left behind when they were
// killed mid-write (the writing process is gone). Returns how many it removed.
int remove_abandoned_temporaries(const std::filesystem::path& path);

// Throws UserError when the directory of `path` has less than `bytes_needed` free.
void check_free_space(const std::filesystem::path& path, std::uint64_t bytes_needed);

// A file that could not be written for want of room or rights (a full disk, a file-size limit,
// a quota): the user's environment, told in one line that names the file and the system's
// reason.
class FileWriteError : public UserError {
 public:
  FileWriteError(const std::filesystem::path& path, int error_number);
  // The system's words alone ("No space left on device").
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// Writes `contents` to a temporary file beside `path`, then moves it to `path`. Without
// overwrite the move refuses to replace a file that appeared meanwhile. The temporary file is
// removed if anything fails; a failed write throws FileWriteError naming `path`.
void write_atomically(const std::filesystem::path& path, bool overwrite, std::string_view contents);

// A text export (JSON, a script) written the same way; an existing regular file is replaced only
// with overwrite. Call check_output_path(path, overwrite, option) first.
void write_text_atomically(const std::filesystem::path& path, const std::string& text,
                           bool overwrite = true);

}  // namespace dlscale::results
