// The run driver: carries out a checked TrainingPlan on every rank of the launch. Each sweep point
// trains on its group of ranks while the others wait; rank 0 gathers each point, prints its
// summary, analyses the study and writes the results file.
#pragma once

#include "comm/mpi_session.hpp"
#include "driver/training_plan.hpp"
#include "results/study_record.hpp"

namespace dlscale::driver {

// Returns the process exit status: 0, or 1 when the replicas' parameters differ.
int run_training_plan(const TrainingPlan& plan, const comm::MpiSession& mpi,
                      const results::FileOrigin& origin);

}  // namespace dlscale::driver
