// SIGTERM (Slurm at a job's time limit, scancel, mpirun passing on a kill) and SIGINT (Ctrl-C)
// ask a training launch to stop: the ranks agree to end the point they are in after the current
// iteration, keep what they measured, and exit 128 + the signal's number.
#pragma once

#include <string>

namespace dlscale::driver {

// Replaces the default handlers of SIGTERM and SIGINT with one that only records the signal.
void install_stop_signal_handlers();

// The first stop signal received, or 0.
int stop_signal_received();

// "SIGTERM", "SIGINT".
std::string stop_signal_name(int signal);

}  // namespace dlscale::driver
