// Markov-chain sequences from counter-based random numbers: the chain is never stored.
#include "workloads/synthetic_sequences.hpp"

#include <algorithm>

#include "core/random.hpp"

namespace dlscale::workloads {

namespace {
constexpr std::uint64_t chain_stream = 0xc4a1e;
constexpr std::uint64_t sample_stream_base = 0x5e9e000000000000ULL;
constexpr int successors = 4;
constexpr double cumulative_probability[successors] = {0.5, 0.75, 0.9, 1.0};
}  // namespace

HostBatch make_markov_batch(int batch, int steps, int vocabulary, std::uint64_t seed, int rank,
                            int batch_index) {
  const CounterRandom chain(seed, chain_stream);
  const CounterRandom samples(
      seed, sample_stream_base + (std::uint64_t(rank) << 24) + std::uint64_t(batch_index));
  HostBatch data;
  data.inputs.resize(std::size_t(batch) * steps);
  data.labels.resize(std::size_t(batch) * steps);
  for (int b = 0; b < batch; ++b) {
    const std::uint64_t base = std::uint64_t(b) * (std::uint64_t(steps) + 1);
    auto token = std::uint64_t(samples.uniform(base) * vocabulary);
    for (int t = 0; t < steps; ++t) {
      const double draw = samples.uniform(base + 1 + t);
      int choice = 0;
      while (draw >= cumulative_probability[choice]) ++choice;
      const auto next = std::uint64_t(chain.uniform(token * successors + choice) * vocabulary);
      data.inputs[std::size_t(b) * steps + t] = float(token);
      data.labels[std::size_t(b) * steps + t] = std::int32_t(next);
      token = next;
    }
  }
  return data;
}

double markov_best_accuracy(int vocabulary, std::uint64_t seed) {
  const CounterRandom chain(seed, chain_stream);
  double sum = 0;
  for (std::uint64_t token = 0; token < std::uint64_t(vocabulary); ++token) {
    std::uint64_t next[successors];
    double probability[successors];
    for (int choice = 0; choice < successors; ++choice) {
      next[choice] = std::uint64_t(chain.uniform(token * successors + choice) * vocabulary);
      probability[choice] =
          cumulative_probability[choice] - (choice == 0 ? 0 : cumulative_probability[choice - 1]);
    }
    double best = 0;
    for (int a = 0; a < successors; ++a) {
      double merged = 0;
      for (int b = 0; b < successors; ++b)
        if (next[b] == next[a]) merged += probability[b];
      best = std::max(best, merged);
    }
    sum += best;
  }
  return sum / vocabulary;
}

}  // namespace dlscale::workloads
