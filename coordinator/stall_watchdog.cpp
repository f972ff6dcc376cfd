// UDP, not MPI: the heartbeat must get through exactly when MPI is stuck, and a watchdog thread
// calling MPI would need MPI_THREAD_MULTIPLE. Datagrams carry a token drawn for this job, so a
// stray packet from another job on the same port is ignored.
#include "coordinator/stall_watchdog.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/mpi_check.hpp"
#include "core/host_info.hpp"

namespace dlscale::coordinator {

namespace {

constexpr int most_addresses = 16;  // IPv4 addresses a watcher is reached at
constexpr int host_name_bytes = 256;
constexpr std::size_t ranks_named = 8;  // in one diagnosis line

struct Heartbeat {
  std::uint64_t job_token;
  std::uint64_t progress;
  std::int32_t rank;
  std::int32_t reserved;
};

// Where a watcher listens: its UDP port on each of its host's IPv4 addresses.
struct Endpoints {
  std::uint32_t port = 0;  // network order
  std::uint32_t count = 0;
  std::uint32_t addresses[most_addresses] = {};  // network order
};

// Binds a UDP socket on every address of this host and lists where it can be reached.
int open_listening_socket(Endpoints& endpoints) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof any;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
    ::close(fd);
    return -1;
  }
  endpoints.port = any.sin_port;
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) == 0) {
    for (const ifaddrs* i = interfaces; i != nullptr && endpoints.count < most_addresses;
         i = i->ifa_next)
      if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP))
        endpoints.addresses[endpoints.count++] =
            reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    ::freeifaddrs(interfaces);
  }
  return fd;
}

std::string seconds_text(double seconds) { return fmt::format("{:.0f} s", seconds); }

// Whether process `pid` runs Open MPI's launcher. Only system calls: it also runs in a child
// forked from this multi-threaded process, where allocating could deadlock.
bool runs_open_mpi_launcher(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/comm", int(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char name[32] = {};
  const ssize_t length = ::read(fd, name, sizeof name - 1);
  ::close(fd);
  if (length <= 0) return false;
  if (name[length - 1] == '\n') name[length - 1] = '\0';
  for (const char* launcher : {"mpirun", "mpiexec", "orterun", "prterun"})
    if (std::strcmp(name, launcher) == 0) return true;
  return false;
}

// fork(2) as the bare system call. glibc's fork() first takes every malloc arena's lock (and runs
// the atfork handlers of the libraries, Open MPI's among them), so it waits forever where the
// stalled thread was stopped holding one: the watchdog then never exits (a step stopped inside
// malloc, stalled_step_test.py). The children run only system calls.
pid_t raw_fork() { return pid_t(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0)); }

void sleep_seconds(double seconds) {
  timespec duration{time_t(seconds), long((seconds - double(time_t(seconds))) * 1e9)};
  while (::nanosleep(&duration, &duration) != 0 && errno == EINTR) {
  }
}

// When this process exits, mpirun ends the job, but first waits for every node's daemon to kill
// its ranks: a node that is cut off never answers, and mpirun would wait for its TCP keepalive
// (8 minutes by default). A detached grandchild gives mpirun a grace period to end the job by
// itself (with this process's exit status), and otherwise interrupts it twice, as a user's two
// Ctrl-C would, which makes it end at once. Under srun or a remote daemon, nothing is done.
void interrupt_launcher_if_it_hangs() {
  constexpr double grace_seconds = 10;
  const pid_t launcher = getppid();
  if (!runs_open_mpi_launcher(launcher)) return;
  if (raw_fork() != 0) return;  // the parent goes on to exit; a failed fork changes nothing
  ::setsid();
  if (raw_fork() != 0) ::_exit(0);  // the grandchild is no longer the exiting rank's child
  sleep_seconds(grace_seconds);
  if (!runs_open_mpi_launcher(launcher)) ::_exit(0);
  ::kill(launcher, SIGINT);
  sleep_seconds(0.5);
  ::kill(launcher, SIGINT);
  ::_exit(0);
}

}  // namespace

struct StallWatchdog::Peer {
  int rank = 0;
  bool heard = false;
  double last_heard_seconds = 0;
  std::uint64_t progress = 0;
};

StallWatchdog::StallWatchdog(MPI_Comm world, const StallSettings& settings, OnStall on_stall)
    : settings_(settings),
      on_stall_(std::move(on_stall)),
      start_(std::chrono::steady_clock::now()) {
  DLSCALE_MPI_CHECK(MPI_Comm_rank(world, &rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(world, &size_));
  if (settings_.timeout_seconds == 0) return;
  // A job of one process has no one to send heartbeats to, and needs none: its own watcher
  // thread runs while it lives, and judges only its progress (a GPU step that never completes,
  // a call that never returns).
  if (size_ == 1) {
    hosts_.push_back(host_name());
    peers_.push_back({0});
    watcher_ = std::thread([this] { watch(); });
    return;
  }
  // Every rank takes part in the collectives below; the settings are the same everywhere.

  char host[host_name_bytes] = {};
  const std::string name = host_name();
  std::strncpy(host, name.c_str(), host_name_bytes - 1);
  std::vector<char> all_hosts(std::size_t(size_) * host_name_bytes);
  DLSCALE_MPI_CHECK(MPI_Allgather(host, host_name_bytes, MPI_CHAR, all_hosts.data(),
                                  host_name_bytes, MPI_CHAR, world));
  for (int r = 0; r < size_; ++r) hosts_.emplace_back(all_hosts.data() + r * host_name_bytes);

  if (rank_ == 0)
    job_token_ = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::uint64_t(getpid());
  DLSCALE_MPI_CHECK(MPI_Bcast(&job_token_, 1, MPI_UINT64_T, 0, world));

  // Rank 0 watches every rank; rank 1 watches rank 0.
  Endpoints mine;
  if (rank_ <= 1) receive_socket_ = open_listening_socket(mine);
  for (int watcher = 0; watcher <= 1; ++watcher) {
    Endpoints endpoints = mine;
    DLSCALE_MPI_CHECK(MPI_Bcast(&endpoints, sizeof endpoints, MPI_BYTE, watcher, world));
    const bool sends_to_it = watcher == 0 || rank_ == 0;
    if (!sends_to_it || endpoints.port == 0) continue;
    for (std::uint32_t a = 0; a < endpoints.count; ++a) {
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = endpoints.port;
      address.sin_addr.s_addr = endpoints.addresses[a];
      const auto* bytes = reinterpret_cast<const unsigned char*>(&address);
      destinations_.emplace_back(bytes, bytes + sizeof address);
    }
  }
  if (rank_ == 0)
    for (int r = 0; r < size_; ++r) peers_.push_back({r});
  else if (rank_ == 1)
    peers_.push_back({0});

  send_socket_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (send_socket_ >= 0) sender_ = std::thread([this] { send_heartbeats(); });
  if (receive_socket_ >= 0) watcher_ = std::thread([this] { watch(); });
}

StallWatchdog::~StallWatchdog() {
  stopping_ = true;
  if (sender_.joinable()) sender_.join();
  if (watcher_.joinable()) watcher_.join();
  if (send_socket_ >= 0) ::close(send_socket_);
  if (receive_socket_ >= 0) ::close(receive_socket_);
}

void StallWatchdog::begin_point(int ranks) {
  point_ranks_ = ranks;
  step_timed_ = false;
  slowest_step_seconds_ = 0;
  progressed();
}

void StallWatchdog::progressed(double step_seconds) {
  progress_.fetch_add(1, std::memory_order_relaxed);
  if (step_seconds > 0) step_timed_ = true;
  double slowest = slowest_step_seconds_.load(std::memory_order_relaxed);
  while (step_seconds > slowest &&
         !slowest_step_seconds_.compare_exchange_weak(slowest, step_seconds)) {
  }
}

double StallWatchdog::timeout_seconds() const {
  if (settings_.timeout_seconds > 0) return settings_.timeout_seconds;
  return std::max(settings_.automatic_floor_seconds, 10 * slowest_step_seconds_.load());
}

void StallWatchdog::send_heartbeats() {
  const auto interval = std::chrono::duration<double>(settings_.heartbeat_interval_seconds);
  while (!stopping_) {
    const Heartbeat beat{job_token_, progress_.load(std::memory_order_relaxed), rank_, 0};
    for (const auto& destination : destinations_)
      ::sendto(send_socket_, &beat, sizeof beat, MSG_DONTWAIT,
               reinterpret_cast<const sockaddr*>(destination.data()),
               socklen_t(destination.size()));
    std::this_thread::sleep_for(interval);
  }
}

void StallWatchdog::watch() {
  const auto now_seconds = [this] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  };
  const int poll_milliseconds = int(settings_.heartbeat_interval_seconds * 500);
  double previous_look = now_seconds();
  const auto hear = [&](const Heartbeat& beat) {
    for (auto& peer : peers_) {
      if (peer.rank != beat.rank) continue;
      if (!peer.heard || beat.progress > peer.progress) last_progress_seconds_ = now_seconds();
      peer.heard = true;
      peer.last_heard_seconds = now_seconds();
      peer.progress = std::max(peer.progress, beat.progress);
    }
  };
  while (!stopping_) {
    if (receive_socket_ < 0) {  // a job of one process: its own progress, read directly
      std::this_thread::sleep_for(std::chrono::milliseconds(poll_milliseconds));
      hear({job_token_, progress_.load(std::memory_order_relaxed), rank_, 0});
    } else if (pollfd ready{receive_socket_, POLLIN, 0}; ::poll(&ready, 1, poll_milliseconds) > 0) {
      Heartbeat beat{};
      while (::recv(receive_socket_, &beat, sizeof beat, MSG_DONTWAIT) == ssize_t(sizeof beat))
        if (beat.job_token == job_token_) hear(beat);
    }
    // A watcher that was itself stopped (SIGSTOP, a suspended machine) heard nothing while it
    // slept, and its own heartbeats stopped too: that silence is not the others'. Without this,
    // a stopped rank 0, woken by Open MPI to be ended, would report its own stall a second time.
    const double now = now_seconds();
    if (now - previous_look > timeout_seconds() / 2) {
      for (auto& peer : peers_) peer.last_heard_seconds = now;
      last_progress_seconds_ = now;
    }
    previous_look = now;
    diagnose(now);
  }
}

void StallWatchdog::diagnose(double now) {
  const double timeout = timeout_seconds();
  const auto named = [&](const std::vector<const Peer*>& ranks) {
    std::vector<std::string> names;
    for (std::size_t k = 0; k < ranks.size() && k < ranks_named; ++k)
      names.push_back(fmt::format("{} ({})", ranks[k]->rank, hosts_[ranks[k]->rank]));
    if (ranks.size() > ranks_named)
      names.push_back(fmt::format("and {} more", ranks.size() - ranks_named));
    return fmt::format("{}", fmt::join(names, ", "));
  };
  // A rank never heard from is not judged: its datagrams may not be able to reach us at all.
  std::vector<const Peer*> silent;
  for (const auto& peer : peers_)
    if (peer.heard && now - peer.last_heard_seconds > timeout) silent.push_back(&peer);
  if (!silent.empty()) {
    const double longest =
        now - std::min_element(
                  silent.begin(), silent.end(),
                  [](auto* a, auto* b) { return a->last_heard_seconds < b->last_heard_seconds; })[0]
                  ->last_heard_seconds;
    end_job(
        fmt::format("stalled: rank{} {} sent no heartbeat for {} (stopped, hung or cut off "
                    "from the network; --stall-timeout {})",
                    silent.size() == 1 ? "" : "s", named(silent), seconds_text(longest),
                    seconds_text(timeout)));
  }
  // Only rank 0 watches every rank, so only it can tell that none of them progresses; and only
  // once an iteration of this point has shown how long one takes (a large model's first step,
  // or its set-up, may take minutes, while the heartbeats show that the ranks are alive). A
  // point that rank 0 trains alone is judged too: its step can hang as well as a job's.
  const std::size_t training = std::min(peers_.size(), std::size_t(point_ranks_.load()));
  if (rank_ != 0 || training < 1 || !step_timed_ || now - last_progress_seconds_ <= timeout) return;
  if (size_ == 1)
    end_job(
        fmt::format("stalled: no iteration finished for {} (a step or a call that does not "
                    "return; --stall-timeout {})",
                    seconds_text(now - last_progress_seconds_), seconds_text(timeout)));
  // Peers are in rank order: the first `training` of them train this point.
  std::uint64_t fewest = peers_.front().progress;
  for (std::size_t r = 0; r < training; ++r) fewest = std::min(fewest, peers_[r].progress);
  std::vector<const Peer*> behind;
  for (std::size_t r = 0; r < training; ++r)
    if (peers_[r].progress == fewest) behind.push_back(&peers_[r]);
  end_job(
      fmt::format("stalled: no rank progressed for {}, though all are alive; furthest "
                  "behind: rank{} {} (--stall-timeout {})",
                  seconds_text(now - last_progress_seconds_), behind.size() == 1 ? "" : "s",
                  named(behind), seconds_text(timeout)));
}

// Runs on the watchdog's thread while the stalled one may hold any lock it took (its malloc arena,
// a stream's): the diagnosis is made with this thread's own allocations (glibc gives each thread
// an arena of its own), and the streams are flushed and the launcher's watch forked without
// taking the locks of the others.
void StallWatchdog::end_job(const std::string& diagnosis) {
  stopping_ = true;
  on_stall_(diagnosis);
  ::fflush_unlocked(stdout);
  ::fflush_unlocked(stderr);
  interrupt_launcher_if_it_hangs();
  std::_Exit(settings_.exit_status);
}

}  // namespace dlscale::coordinator
