// Results files are never clobbered and never half-written: the file is built under a temporary
// name in the same directory and renamed into place only when complete.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace dlscale::results {

// Checked before training starts, so a bad path costs the user seconds, not a run. Throws
// UserError if the file exists (and overwrite is false) or its directory is missing or not
// writable.
void check_output_path(const std::filesystem::path& path, bool overwrite);

// Removes the temporary files of `path` that processes on this host left behind when they were
// killed mid-write (the writing process is gone). Returns how many it removed.
int remove_abandoned_temporaries(const std::filesystem::path& path);

// Throws UserError when the directory of `path` has less than `bytes_needed` free.
void check_free_space(const std::filesystem::path& path, std::uint64_t bytes_needed);

// Calls write(temporary_path), then moves the temporary file to `path`. Without overwrite the
// move refuses to replace a file that appeared meanwhile. The temporary file is removed if
// anything fails.
void write_atomically(const std::filesystem::path& path, bool overwrite,
                      const std::function<void(const std::filesystem::path&)>& write);

// A text export (JSON, CSV) written the same way; an existing file is replaced.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace dlscale::results
