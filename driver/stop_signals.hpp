// SIGTERM (Slurm at a job's time limit, scancel, mpirun passing on a kill), SIGINT (Ctrl-C) and
// SIGHUP (a closed terminal or ssh session) ask a training launch to stop: the ranks agree to end
// the point they are in after the current iteration, keep what they measured, and exit 128 + the
// signal's number.
#pragma once

#include <string>

namespace dlscale::driver {

// Replaces the default handlers of SIGTERM, SIGINT and SIGHUP with one that only records the
// signal.
void install_stop_signal_handlers();

// The first stop signal received, or 0.
int stop_signal_received();

// "SIGTERM", "SIGINT", "SIGHUP".
std::string stop_signal_name(int signal);

}  // namespace dlscale::driver
