// SIGTERM (Slurm at a job's time limit, scancel, mpirun passing on a kill), SIGINT (Ctrl-C) and
// SIGHUP (a closed terminal or ssh session) ask a training launch to stop: the ranks agree to end
// the point they are in after the current iteration, keep what they measured, and exit 128 + the
// signal's number.
#pragma once

#include <mpi.h>

#include <string>

namespace dlscale::coordinator {

// Replaces the default handlers of SIGTERM, SIGINT and SIGHUP with one that only records the
// signal.
void install_stop_signal_handlers();

// The first stop signal received, or 0.
int stop_signal_received();

// The stop signal any rank of `comm` received (the largest number), or 0: one decision for all.
// Collective over `comm`.
int agreed_stop_signal(MPI_Comm comm);

// "SIGTERM", "SIGINT", "SIGHUP".
std::string stop_signal_name(int signal);

// A stop signal that reaches a rank waiting outside a sweep point would otherwise be seen only
// when the point ends, which may be minutes later. The relay passes it on: the waiting rank sends
// it to world rank 0 (a rank of every point), which takes it as its own before the point's ranks
// agree whether to stop after an iteration.
class StopSignalRelay {
 public:
  explicit StopSignalRelay(MPI_Comm world);  // collective over world
  StopSignalRelay(const StopSignalRelay&) = delete;
  StopSignalRelay& operator=(const StopSignalRelay&) = delete;

  // On a waiting rank: sends its stop signal to world rank 0, once, where it has one.
  void forward();
  // On world rank 0: takes any forwarded stop signal as its own. Other ranks: nothing.
  void take_forwarded();
  // Collective over world, the last call: rank 0 receives every message still on its way.
  void finish();

 private:
  MPI_Comm channel_ = MPI_COMM_NULL;  // a duplicate of world: its messages meet no others
  int rank_ = 0;
  int sent_signal_ = 0;
  MPI_Request sent_ = MPI_REQUEST_NULL;
  int received_ = 0;  // on rank 0
};

}  // namespace dlscale::coordinator
