// dlscale-bench-layer-times: where a run's step went, layer by layer, from its results file: the
// median forward, backward and update phases, then each layer's backward time (the CUDA events or
// host clock readings the loop records between layers) with its share of the backward phase.
// It reads the file with dlscale's own reader, so it needs no Python or h5py: on a GPU machine it
// sits beside torch.profiler's table for the same case (benchmarks/gpu_step_profile.sh).
//   usage: dlscale-bench-layer-times RESULTS.h5 [--run N]   (every run without --run)
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/statistics.hpp"
#include "core/errors.hpp"
#include "results/reader.hpp"

namespace {

using namespace dlscale;

// Median over the measured iterations (warm-up left out) and every rank.
double median_of(const results::RunRecord& run, const auto& value_at) {
  std::vector<double> samples;
  const int warmup = run.configuration.warmup_iterations;
  for (int i = warmup; i < run.iterations; ++i)
    for (int r = 0; r < run.ranks; ++r) samples.push_back(value_at(i, r));
  return samples.empty() ? 0.0 : analysis::median(samples);
}

void print_run(const results::RunRecord& run, std::size_t index) {
  const auto& c = run.configuration;
  std::cout << fmt::format(
      "run {}: {} batch {} on {} rank(s), {} {}, {} measured iteration(s); medians over them and "
      "the ranks, in ms\n",
      index, c.model, c.batch_per_rank, run.ranks, c.device, c.precision,
      run.iterations - c.warmup_iterations);
  for (const Phase phase :
       {Phase::forward, Phase::backward, Phase::allreduce, Phase::update, Phase::step})
    std::cout << fmt::format(
        "  {:10} {:10.3f}\n", name_of(phase),
        1e3 * median_of(run, [&](int i, int r) { return run.seconds(i, r, phase); }));
  const double backward =
      median_of(run, [&](int i, int r) { return run.seconds(i, r, Phase::backward); });
  const std::size_t layers = run.layers.size();
  std::cout << "  layer  kind               parameters  backward ms  share of backward\n";
  for (std::size_t l = layers; l-- > 0;) {  // backward order
    const double seconds = median_of(run, [&](int i, int r) {
      return run.layer_backward_seconds[(std::size_t(i) * run.ranks + r) * layers + l];
    });
    std::cout << fmt::format("  {:5}  {:17}  {:10}  {:11.3f}  {:16.1f}%\n", l, run.layers[l].kind,
                             run.layers[l].parameter_count, 1e3 * seconds,
                             backward > 0 ? 100 * seconds / backward : 0.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool one_run = args.size() == 3 && args[1] == "--run";
  if (args.size() != 1 && !one_run) {
    std::cerr << "usage: dlscale-bench-layer-times RESULTS.h5 [--run N]\n";
    return 2;
  }
  try {
    const results::ResultsFile file = results::read_results(args[0]);
    if (file.runs.empty()) throw UserError(args[0] + " holds no run");
    std::size_t first = 0, last = file.runs.size();
    if (one_run) {
      first = std::stoul(args[2]);
      if (first >= file.runs.size())
        throw UserError(
            fmt::format("--run {}: {} holds runs 0 to {}", args[2], args[0], file.runs.size() - 1));
      last = first + 1;
    }
    for (std::size_t r = first; r < last; ++r) print_run(file.runs[r], r);
  } catch (const std::exception& error) {
    std::cerr << "dlscale-bench-layer-times: " << error.what() << "\n";
    return 2;
  }
  return 0;
}
