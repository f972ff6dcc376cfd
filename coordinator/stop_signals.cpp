// The handler only stores the signal number: everything else happens where the driver checks it,
// between iterations, where stopping is safe.
#include "coordinator/stop_signals.hpp"

#include <atomic>
#include <csignal>
#include <cstring>

#include "comm/mpi_check.hpp"

namespace dlscale::coordinator {

namespace {

std::atomic<int> first_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "read and written in a signal handler");

extern "C" void record_stop_signal(int signal) {
  int none = 0;
  first_stop_signal.compare_exchange_strong(none, signal);
}

constexpr int forwarded_signal_tag = 1;

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // A closed terminal or a dropped ssh session: the run stops as on SIGTERM, keeping its results.
  sigaction(SIGHUP, &action, nullptr);
}

int stop_signal_received() { return first_stop_signal.load(); }

std::string stop_signal_name(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation ? std::string("SIG") + abbreviation : "signal " + std::to_string(signal);
}

StopSignalRelay::StopSignalRelay(MPI_Comm world) {
  DLSCALE_MPI_CHECK(MPI_Comm_dup(world, &channel_));
  DLSCALE_MPI_CHECK(MPI_Comm_rank(channel_, &rank_));
}

void StopSignalRelay::forward() {
  if (rank_ == 0 || sent_ != MPI_REQUEST_NULL || sent_signal_ != 0) return;
  sent_signal_ = stop_signal_received();
  if (sent_signal_ == 0) return;
  DLSCALE_MPI_CHECK(
      MPI_Isend(&sent_signal_, 1, MPI_INT, 0, forwarded_signal_tag, channel_, &sent_));
}

void StopSignalRelay::take_forwarded() {
  if (rank_ != 0) return;
  for (int waiting = 1;;) {
    DLSCALE_MPI_CHECK(
        MPI_Iprobe(MPI_ANY_SOURCE, forwarded_signal_tag, channel_, &waiting, MPI_STATUS_IGNORE));
    if (!waiting) return;
    int signal = 0;
    DLSCALE_MPI_CHECK(MPI_Recv(&signal, 1, MPI_INT, MPI_ANY_SOURCE, forwarded_signal_tag, channel_,
                               MPI_STATUS_IGNORE));
    ++received_;
    record_stop_signal(signal);
  }
}

void StopSignalRelay::finish() {
  const int sent = sent_signal_ != 0 ? 1 : 0;
  int sent_in_all = 0;
  DLSCALE_MPI_CHECK(MPI_Reduce(&sent, &sent_in_all, 1, MPI_INT, MPI_SUM, 0, channel_));
  if (rank_ == 0)
    for (; received_ < sent_in_all; ++received_) {
      int signal = 0;
      DLSCALE_MPI_CHECK(MPI_Recv(&signal, 1, MPI_INT, MPI_ANY_SOURCE, forwarded_signal_tag,
                                 channel_, MPI_STATUS_IGNORE));
    }
  DLSCALE_MPI_CHECK(MPI_Wait(&sent_, MPI_STATUS_IGNORE));
  DLSCALE_MPI_CHECK(MPI_Comm_free(&channel_));
}

int agreed_stop_signal(MPI_Comm comm) {
  const int mine = stop_signal_received();
  int agreed = 0;
  DLSCALE_MPI_CHECK(MPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, comm));
  return agreed;
}

}  // namespace dlscale::coordinator
