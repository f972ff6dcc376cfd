// The run driver: carries out a checked TrainingPlan on every rank of the launch. Each sweep point
// trains on its group of ranks while the others wait; rank 0 gathers each point, prints its
// summary, analyses the study and writes the results file. A point that cannot be measured (out
// of memory, diverged, over its time limit) is kept with its reason, and the sweep goes on.
#pragma once

#include "comm/mpi_session.hpp"
#include "driver/training_plan.hpp"
#include "results/study_record.hpp"

namespace dlscale::driver {

// Exit statuses beside 0 (success), 1 (a failure) and 2 (a usage error).
inline constexpr int exit_some_points_failed = 3;
inline constexpr int exit_stalled = 4;  // a rank fell silent or no rank progressed

// Returns the process exit status: 0; 1 when the replicas' parameters differ;
// exit_some_points_failed when a sweep point could not be measured (the others are kept); 128 + N
// after stop signal N. A stalled job ends the process with exit_stalled from the watchdog.
int run_training_plan(TrainingPlan plan, const comm::MpiSession& mpi,
                      const results::FileOrigin& origin);

}  // namespace dlscale::driver
