// A probe is one source of resource numbers (a /proc file, the RAPL counters, NVML) that the
// periodic sampler reads at every tick. It declares its series up front, so a source that cannot
// be read here still yields every measurement it would have made, absent with the reason.
#pragma once

#include <string>
#include <vector>

#include "results/measurement.hpp"

namespace dlscale::worker {

class Probe {
 public:
  virtual ~Probe() = default;

  // Why this source cannot be read on this machine; empty when it can. When it is not empty,
  // read() is never called and every series and total is recorded absent with this reason.
  virtual std::string absent_reason() const = 0;

  // The time series it reads, in the order read() returns their values: name, units,
  // description, headline and shared_by set, no samples. One may already be absent (an NVML
  // field this GPU does not support); the sampler leaves it so.
  virtual std::vector<results::Measurement> series() const = 0;

  // Reads the source once, `seconds` on the run clock: one value per series. NaN where a series
  // has no value at this tick: a rate at the first read (nothing to difference yet), or a read
  // that failed this once.
  virtual std::vector<double> read(double seconds) = 0;

  // Per-rank measurements over every read so far (the energy from the first read to the last),
  // declared like series() and valid at any time; the sampler asks after the last read.
  virtual std::vector<results::Measurement> totals() const { return {}; }

  // Why measurement `index` (of series() followed by totals()) got no value at any read, asked
  // after the last read only of one that got none. A probe that knows better than the default
  // says so: a rate whose counters never moved between two reads (a run shorter than a clock
  // tick), or a thread that this run never started.
  virtual std::string why_never_measured(std::size_t /*index*/) const {
    return "every read of it failed";
  }
};

}  // namespace dlscale::worker
