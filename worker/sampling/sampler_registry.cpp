// make_samplers: which samplers a rank runs. Interval 0 keeps only what is read once at stop;
// otherwise one periodic sampler reads the process, host, RAPL, thread placement and (on a GPU)
// NVML probes.
#include <memory>

#include "worker/sampling/host_probe.hpp"
#include "worker/sampling/nvml_probe.hpp"
#include "worker/sampling/peak_memory_sampler.hpp"
#include "worker/sampling/periodic_sampler.hpp"
#include "worker/sampling/process_probe.hpp"
#include "worker/sampling/rapl_probe.hpp"
#include "worker/sampling/sampler.hpp"
#include "worker/sampling/thread_placement_probe.hpp"

namespace dlscale::worker {

std::vector<std::unique_ptr<Sampler>> make_samplers(const SamplingSettings& settings) {
  std::vector<std::unique_ptr<Sampler>> samplers;
  samplers.push_back(std::make_unique<PeakMemorySampler>());
  if (settings.interval_seconds <= 0) return samplers;

  std::vector<std::unique_ptr<Probe>> probes;
  probes.push_back(std::make_unique<ProcessProbe>());
  probes.push_back(std::make_unique<HostProbe>());
  probes.push_back(std::make_unique<RaplProbe>());
  probes.push_back(std::make_unique<ThreadPlacementProbe>());
  if (settings.gpu_index >= 0) probes.push_back(std::make_unique<NvmlProbe>(settings.gpu_index));
  samplers.push_back(
      std::make_unique<PeriodicSampler>(settings.interval_seconds, std::move(probes)));
  return samplers;
}

}  // namespace dlscale::worker
