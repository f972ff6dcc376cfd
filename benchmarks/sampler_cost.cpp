// dlscale-bench-sampler: what the resource sampler costs a rank. It runs the samplers a rank runs
// (make_samplers) at each interval for a few seconds next to a one-core compute loop, as in
// training, and reports
//   busy_us_per_tick = sampler_busy_seconds / sampler_ticks   (the sampling thread's CPU time)
//   busy_%           = sampler_busy_seconds / wall_seconds * 100   (share of one core)
// The sampler should take far below 0.5% of a core at the 0.2 s default. (The compute loop's own
// rate with and without the sampler cannot resolve that: it varies by more between runs.)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "core/run_clock.hpp"
#include "worker/sampling/sampler.hpp"

namespace {

using namespace dlscale;
namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

struct Options {
  double seconds = 5;
  std::vector<double> intervals{0.2, 0.1};
  int gpu_index = -1;
};

Options parse_options(int argc, char** argv) {
  Options options;
  std::string intervals = "0.2,0.1";
  po::options_description description("dlscale-bench-sampler options");
  description.add_options()("help,h", "this help")(
      "seconds", po::value(&options.seconds)->default_value(options.seconds),
      "wall seconds per interval")("intervals", po::value(&intervals)->default_value(intervals),
                                   "sampling intervals in seconds, comma-separated")(
      "gpu", po::value(&options.gpu_index)->default_value(options.gpu_index),
      "CUDA device ordinal to read through NVML; -1 for none");
  po::variables_map values;
  po::store(po::parse_command_line(argc, argv, description), values);
  po::notify(values);
  if (values.count("help")) {
    std::cout << description;
    std::exit(0);
  }
  options.intervals.clear();
  for (std::size_t begin = 0; begin < intervals.size();) {
    const std::size_t end = std::min(intervals.find(',', begin), intervals.size());
    const std::string interval = intervals.substr(begin, end - begin);
    char* parsed_end = nullptr;
    options.intervals.push_back(std::strtod(interval.c_str(), &parsed_end));
    if (interval.empty() || *parsed_end != '\0' || options.intervals.back() < 0)
      throw std::invalid_argument("--intervals: '" + interval + "' is not a number of seconds");
    begin = end + 1;
  }
  return options;
}

// Keeps one core busy for `seconds`: a running sum of a*x + y over a small array that stays in
// cache, checked against the clock every block so the clock costs nothing measurable. The sum
// goes to a volatile so the compiler cannot drop the work.
void compute_for(double seconds) {
  constexpr int length = 4096, passes_per_block = 256;
  std::vector<float> x(length), y(length);
  for (int i = 0; i < length; ++i) {
    x[i] = float(i % 7) * 0.25f;
    y[i] = float(i % 5) * 0.5f;
  }
  volatile float sink = 0;
  const auto begin = Clock::now();
  do {
    for (int pass = 0; pass < passes_per_block; ++pass) {
      const float a = 1.0f + float(pass) * 1e-6f;
      float sum = 0;
      for (int i = 0; i < length; ++i) sum += a * x[i] + y[i];
      sink = sink + sum;
    }
  } while (std::chrono::duration<double>(Clock::now() - begin).count() < seconds);
}

double value_of(const std::vector<results::Measurement>& measurements, const std::string& name) {
  for (const auto& measurement : measurements)
    if (measurement.name == name && !measurement.values.empty()) return measurement.values[0];
  return std::nan("");
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse_options(argc, argv);
  fmt::print("{:>10} {:>7} {:>6} {:>9} {:>17} {:>7}\n", "interval_s", "wall_s", "ticks", "busy_ms",
             "busy_us_per_tick", "busy_%");
  for (const double interval : options.intervals) {
    auto samplers =
        worker::make_samplers({.interval_seconds = interval, .gpu_index = options.gpu_index});
    const RunClock clock;
    for (auto& sampler : samplers) sampler->start(clock);
    compute_for(options.seconds);
    std::vector<results::Measurement> measurements;
    for (auto& sampler : samplers)
      for (auto& measurement : sampler->stop()) measurements.push_back(std::move(measurement));
    const double wall_seconds = clock.seconds();

    const double busy_seconds = value_of(measurements, "sampler_busy_seconds");
    const double ticks = value_of(measurements, "sampler_ticks");
    fmt::print("{:>10.3f} {:>7.2f} {:>6.0f} {:>9.3f} {:>17.1f} {:>7.4f}\n", interval, wall_seconds,
               ticks, busy_seconds * 1e3, busy_seconds / ticks * 1e6,
               busy_seconds / wall_seconds * 100);
  }
  return 0;
} catch (const std::exception& error) {
  std::cerr << "dlscale-bench-sampler: " << error.what() << "\n";
  return 1;
}
