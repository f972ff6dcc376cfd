#include "worker/slurm_allocation.hpp"

#include <cstdlib>

#include "core/enum_names.hpp"

namespace dlscale::worker {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

std::optional<results::SlurmAllocation> slurm_allocation() {
  if (environment("SLURM_JOB_ID").empty()) return std::nullopt;
  results::SlurmAllocation allocation{
      environment("SLURM_JOB_ID"),        environment("SLURM_JOB_NAME"),
      environment("SLURM_JOB_NODELIST"),  environment("SLURM_TASKS_PER_NODE"),
      environment("SLURM_CPUS_PER_TASK"), environment("SLURM_ARRAY_TASK_ID")};
  // Slurm itself does not tell a job whether it shares its nodes; the batch script asks
  // scontrol and says so here.
  const std::string exclusive = environment("DLSCALE_NODE_EXCLUSIVE");
  if (yes_no_names.named(exclusive)) allocation.node_exclusive = exclusive;
  return allocation;
}

std::optional<int> slurm_cpus_per_task() {
  const std::string text = environment("SLURM_CPUS_PER_TASK");
  char* end = nullptr;
  const long cpus = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || cpus < 1 || cpus > 1 << 16) return std::nullopt;
  return int(cpus);
}

}  // namespace dlscale::worker
