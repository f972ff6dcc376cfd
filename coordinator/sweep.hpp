// The sweep: carries out a checked TrainingPlan on every rank of the launch. Each sweep point
// trains on its group of ranks while the others wait; rank 0 gathers each point, prints its
// summary, analyses the study and writes the results file. A point that cannot be measured (out
// of memory, diverged, over its time limit) is kept with its reason, and the sweep goes on.
#pragma once

#include "comm/mpi_session.hpp"
#include "coordinator/training_plan.hpp"
#include "results/study_record.hpp"

namespace dlscale::coordinator {

// Exit statuses beside 0 (success), 1 (a failure) and 2 (a usage error).
inline constexpr int exit_some_points_failed = 3;
inline constexpr int exit_stalled = 4;  // a rank fell silent or no rank progressed

// How a sweep ended, for its exit status.
struct SweepOutcome {
  int stop_signal = 0;           // the one the ranks agreed on, or 0
  bool replicas_differ = false;  // some run's ranks ended with different parameters
  bool results_rescued = false;  // the file was kept elsewhere than where the user asked
  int failed_points = 0;
};

// The exit status policy, first match wins: 128 + N after stop signal N; 1 where the replicas'
// parameters differ or the results could not be kept where asked; exit_some_points_failed where
// a point could not be measured (the others are kept); else 0.
int exit_status(const SweepOutcome& outcome);

// Returns the process exit status: 0; 1 when the replicas' parameters differ;
// exit_some_points_failed when a sweep point could not be measured (the others are kept); 128 + N
// after stop signal N. A stalled job ends the process with exit_stalled from the watchdog.
int run_training_plan(TrainingPlan plan, const comm::MpiSession& mpi,
                      const results::FileOrigin& origin);

}  // namespace dlscale::coordinator
