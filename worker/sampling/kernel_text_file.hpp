// Reading the kernel's small text files (/proc/self/stat, /proc/stat, /sys/class/powercap/...)
// whole, with one open and as few reads as the file needs: the probes do it at every tick.
#pragma once

#include <optional>
#include <string>

namespace dlscale::worker {

// The file's text, or nothing; then `why_not`, when given, holds the system's reason
// ("Permission denied"). /proc and /sys files report no size, so it reads until the end.
std::optional<std::string> read_kernel_text_file(const std::string& path,
                                                 std::string* why_not = nullptr);

}  // namespace dlscale::worker
