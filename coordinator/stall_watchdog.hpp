// A heartbeat that does not depend on MPI: every rank sends a UDP datagram with its progress
// twice a second to rank 0, which watches them all (and rank 1 watches rank 0). A rank that is
// stopped, hung in the kernel or cut off from the network falls silent; a job that deadlocks
// stops progressing. Either way the watcher names the ranks and their hosts in one line and ends
// the job, instead of every rank blocking silently in a collective until Open MPI's TCP
// time-outs (minutes) or the batch system's time limit.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

namespace dlscale::coordinator {

struct StallSettings {
  // 0: the watchdog is off. A negative value: automatic, 10 times the slowest step so far and
  // at least `automatic_floor_seconds`.
  double timeout_seconds = -1;
  double automatic_floor_seconds = 60;
  double heartbeat_interval_seconds = 0.5;
  int exit_status = 4;  // of the process that detects the stall
};

class StallWatchdog {
 public:
  // Called on the watching rank's watchdog thread with the one-line diagnosis, to keep and report
  // what it can; the watchdog then ends the process, and with it the job.
  using OnStall = std::function<void(const std::string& diagnosis)>;

  // Collective over `world`. Does nothing but exist when the settings turn it off.
  StallWatchdog(MPI_Comm world, const StallSettings& settings, OnStall on_stall);
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // A new sweep point begins on world ranks 0..ranks-1 (the others wait, so only these are
  // judged by their progress): until its first iteration ends, nothing says how long one takes,
  // so only silence (no heartbeat) counts as a stall.
  void begin_point(int ranks);

  // The calling rank made progress: an iteration ended (its step time sets the automatic
  // timeout), or a step of a point's set-up finished (step_seconds 0).
  void progressed(double step_seconds = 0);

  // The timeout in force now, in seconds.
  double timeout_seconds() const;

 private:
  struct Peer;
  void send_heartbeats();
  void watch();
  void diagnose(double now_seconds);
  [[noreturn]] void end_job(const std::string& diagnosis);

  StallSettings settings_;
  OnStall on_stall_;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t job_token_ = 0;
  std::vector<std::string> hosts_;  // every rank's host, for the diagnosis
  int send_socket_ = -1;
  int receive_socket_ = -1;                               // on a watching rank
  std::vector<std::vector<unsigned char>> destinations_;  // sockaddr_in of each watcher address
  std::vector<Peer> peers_;                               // the ranks this rank watches
  std::atomic<std::uint64_t> progress_{0};
  std::atomic<double> slowest_step_seconds_{0};  // in this point
  std::atomic<bool> step_timed_{false};          // an iteration of this point has ended
  std::atomic<int> point_ranks_{0};              // ranks training in this point
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point start_;
  double last_progress_seconds_ = 0;  // watcher thread only
  std::thread sender_;
  std::thread watcher_;
};

}  // namespace dlscale::coordinator
