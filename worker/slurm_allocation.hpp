// The Slurm allocation a rank runs in, read from the SLURM_* environment that srun and sbatch
// set, so every results file names its job, nodes and task layout. Empty outside Slurm.
#pragma once

#include <optional>
#include <string>

#include "results/run_record.hpp"

namespace dlscale::worker {

// The allocation from this process's environment; nothing when SLURM_JOB_ID is unset.
std::optional<results::SlurmAllocation> slurm_allocation();

// SLURM_CPUS_PER_TASK as a positive number, when Slurm set one: the default thread count.
std::optional<int> slurm_cpus_per_task();

}  // namespace dlscale::worker
