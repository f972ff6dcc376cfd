// fork(), a pipe for the child's error message, and waitpid(): the child only reads and exits.
#include "results/read_in_child.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "results/value_bounds.hpp"

namespace dlscale::results {

namespace {

// The bound of results/value_bounds.hpp on the CPU time a reader may spend on `path`.
rlim_t most_cpu_seconds(const std::filesystem::path& path) {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  return rlim_t(std::ceil(bounds::read_cpu_seconds +
                          (error ? 0.0 : double(bytes)) / bounds::read_bytes_per_cpu_second));
}

// A damaged file must not keep a command busy. The soft limit raises SIGXCPU; the hard one, a
// second later, would be an unexplained SIGKILL.
[[noreturn]] void child(int message_pipe, rlim_t cpu_seconds, const std::function<void()>& read) {
  const rlimit cpu{cpu_seconds, cpu_seconds + 1};
  ::setrlimit(RLIMIT_CPU, &cpu);
  // What the C library says as it aborts on a corrupted heap ("free(): invalid pointer") is not
  // for the user: the parent reports the crash in one line.
  if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) {
    ::dup2(null, STDERR_FILENO);
    ::close(null);
  }
  // A crash here is reported by the parent; the kernel need not write a core file for it.
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  int status = 0;
  std::string message;
  try {
    read();
  } catch (const UserError& error) {
    message = error.what();
    status = 2;
  } catch (const std::exception& error) {
    message = error.what();
    status = 1;
  }
  for (std::size_t sent = 0; sent < message.size();) {
    const ssize_t n = ::write(message_pipe, message.data() + sent, message.size() - sent);
    if (n <= 0) break;
    sent += std::size_t(n);
  }
  ::_exit(status);  // no destructors, atexit handlers or stdio flushes of the parent's state
}

}  // namespace

void require_regular_file(const std::filesystem::path& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status))
    throw UserError(fmt::format("results file '{}' does not exist", path.string()));
  if (std::filesystem::is_directory(status))
    throw UserError(fmt::format("'{}' is a directory, not a results file", path.string()));
  if (!std::filesystem::is_regular_file(status))
    throw UserError(
        fmt::format("'{}' is not a regular file (a pipe or a device is never read: "
                    "it could block the reader forever)",
                    path.string()));
}

void read_in_child(const std::filesystem::path& path, const std::function<void()>& read) {
  require_regular_file(path);
  const rlim_t cpu_seconds = most_cpu_seconds(path);
  int pipe_ends[2];
  if (::pipe(pipe_ends) != 0)
    throw std::runtime_error(fmt::format("pipe() failed: {}", std::strerror(errno)));
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipe_ends[0]);
    ::close(pipe_ends[1]);
    throw std::runtime_error(fmt::format("fork() failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(pipe_ends[0]);
    child(pipe_ends[1], cpu_seconds, read);
  }
  ::close(pipe_ends[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_ends[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    message.append(buffer, std::size_t(n));
  }
  ::close(pipe_ends[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    throw UserError(
        fmt::format("damaged results file: {}: {}", path.string(),
                    signal == SIGXCPU || signal == SIGKILL
                        ? fmt::format("reading it took more than {} s of CPU time", cpu_seconds)
                        : fmt::format("the HDF5 library crashed reading it (SIG{})",
                                      sigabbrev_np(signal) ? sigabbrev_np(signal) : "?")));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) throw UserError(message);
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    throw UserError(fmt::format("damaged results file: {}: {}", path.string(), message));
}

void blame_damage_on_file(const std::filesystem::path& path, const std::function<void()>& read) {
  const std::string damage = "damaged results file: ";
  try {
    read();
  } catch (const UserError& error) {
    const std::string message = error.what();
    if (message.rfind(damage, 0) != 0 || message.rfind(damage + path.string() + ": ", 0) == 0)
      throw;
    throw UserError(damage + path.string() + ": " + message.substr(damage.size()));
  } catch (const LibraryError& error) {
    throw UserError(
        fmt::format("damaged results file: {}: {}", path.string(), error.library_message()));
  } catch (const std::bad_alloc&) {
    throw UserError(
        fmt::format("damaged results file: {}: it declares more data than fits in "
                    "memory",
                    path.string()));
  }
}

}  // namespace dlscale::results
