// The open measurement channel: a measurement is a named series with units and a shape, made by
// a sampler on one rank, gathered, written, read back and summarized generically. Nothing past
// the sampler that makes it knows any measurement by name.
#pragma once

#include <string>
#include <vector>

namespace dlscale::results {

// How a measurement's values are laid out.
enum class MeasurementShape {
  per_rank,       // one value per rank (peak RSS, energy over the measured iterations)
  per_iteration,  // one value per iteration, warm-up included (iteration end times)
  time_series,    // values sampled at times on the run clock (CPU utilisation, GPU power)
};

// What the summary says of it; a study tabulates the energy ones per sample.
enum class Headline {
  none,           // recorded, plotted, not summarized
  mean,           // mean over the samples and ranks
  peak,           // maximum over the samples and ranks
  mean_and_peak,  // mean and maximum
  energy,         // joules over the measured iterations: also per step and per sample
};

// One rank's measurement, as a sampler returns it.
struct Measurement {
  std::string name;   // snake_case, unit last where it helps: process_rss_bytes
  std::string units;  // bytes, cores, %, W, J, MHz, C, ...
  std::string description;
  MeasurementShape shape = MeasurementShape::per_rank;
  Headline headline = Headline::none;
  // Ranks with the same non-empty key measured the same thing (a host's CPUs, a GPU), so a
  // summary counts it once: the host name, or host name and GPU. Empty: this process alone.
  std::string shared_by;
  // Non-empty when it could not be measured, saying why; values are then empty. An absent
  // measurement is never recorded as zero.
  std::string absent_reason;
  std::vector<double> seconds;  // time_series: sample times on the run clock
  std::vector<double> values;   // per_rank: 1; per_iteration: iterations; time_series: samples
};

// A measurement gathered from every rank of a run.
struct MeasurementRecord {
  std::string name;
  std::string units;
  std::string description;
  MeasurementShape shape = MeasurementShape::per_rank;
  Headline headline = Headline::none;
  std::vector<std::string> shared_by;        // [rank]
  std::vector<std::string> absent_reasons;   // [rank], empty where measured
  std::vector<std::vector<double>> seconds;  // [rank][sample], time_series only
  std::vector<std::vector<double>> values;   // [rank][value]
};

const char* shape_name(MeasurementShape shape);
const char* headline_name(Headline headline);
// Throws std::invalid_argument for an unknown name (a damaged or foreign file).
MeasurementShape shape_from_name(const std::string& name);
Headline headline_from_name(const std::string& name);

}  // namespace dlscale::results
