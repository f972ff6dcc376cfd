// Whole-file reads with open/read/close: no stream state, and one system call for a file that
// fits the buffer, which every per-tick file does on all but the largest hosts' /proc/stat.
#include "worker/sampling/kernel_text_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dlscale::worker {

std::optional<std::string> read_kernel_text_file(const std::string& path, std::string* why_not) {
  const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) {
    if (why_not) *why_not = std::strerror(errno);
    return std::nullopt;
  }
  std::string text;
  char buffer[16384];
  for (;;) {
    const ssize_t count = ::read(descriptor, buffer, sizeof buffer);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      if (why_not) *why_not = std::strerror(errno);
      ::close(descriptor);
      return std::nullopt;
    }
    if (count == 0) break;
    text.append(buffer, std::size_t(count));
  }
  ::close(descriptor);
  return text;
}

}  // namespace dlscale::worker
