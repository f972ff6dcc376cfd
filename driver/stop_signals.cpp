// The handler only stores the signal number: everything else happens where the driver checks it,
// between iterations, where stopping is safe.
#include "driver/stop_signals.hpp"

#include <atomic>
#include <csignal>
#include <cstring>

namespace dlscale::driver {

namespace {

std::atomic<int> first_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "read and written in a signal handler");

extern "C" void record_stop_signal(int signal) {
  int none = 0;
  first_stop_signal.compare_exchange_strong(none, signal);
}

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

}  // namespace dlscale::driver
