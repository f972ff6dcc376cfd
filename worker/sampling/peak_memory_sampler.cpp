// Peak RSS from getrusage's ru_maxrss, through core/host_info.
#include "worker/sampling/peak_memory_sampler.hpp"

#include "core/host_info.hpp"

namespace dlscale::worker {

std::vector<results::Measurement> PeakMemorySampler::stop() {
  return {{.name = "peak_resident_bytes",
           .units = "bytes",
           .description = "peak resident set size of the process (getrusage ru_maxrss)",
           .shape = results::MeasurementShape::per_rank,
           .headline = results::Headline::peak,
           .shared_by = "",
           .absent_reason = "",
           .seconds = {},
           .values = {double(peak_resident_bytes())}}};
}

}  // namespace dlscale::worker
