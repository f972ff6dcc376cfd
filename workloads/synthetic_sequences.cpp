// Markov-chain sequences from counter-based random numbers: the chain is never stored.
#include "workloads/synthetic_sequences.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

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

namespace {

// One token's successors and their probabilities, as the chain draws them.
struct Successors {
  std::uint64_t next[successors];
  double probability[successors];

  Successors(const CounterRandom& chain, std::uint64_t token, int vocabulary) {
    for (int choice = 0; choice < successors; ++choice) {
      next[choice] = std::uint64_t(chain.uniform(token * successors + choice) * vocabulary);
      probability[choice] =
          cumulative_probability[choice] - (choice == 0 ? 0 : cumulative_probability[choice - 1]);
    }
  }
  // The probability of going to next[choice], summed over the choices that reach the same token.
  double merged(int choice) const {
    double sum = 0;
    for (int other = 0; other < successors; ++other)
      if (next[other] == next[choice]) sum += probability[other];
    return sum;
  }
  bool first_to_reach_its_token(int choice) const {
    for (int other = 0; other < choice; ++other)
      if (next[other] == next[choice]) return false;
    return true;
  }
  // -sum of q ln q over the distinct successors q.
  double entropy_nats() const {
    double entropy = 0;
    for (int choice = 0; choice < successors; ++choice)
      if (first_to_reach_its_token(choice)) entropy -= merged(choice) * std::log(merged(choice));
    return entropy;
  }
};

}  // namespace

double markov_best_accuracy(int vocabulary, std::uint64_t seed) {
  const CounterRandom chain(seed, chain_stream);
  double sum = 0;
  for (std::uint64_t token = 0; token < std::uint64_t(vocabulary); ++token) {
    const Successors of_token(chain, token, vocabulary);
    double best = 0;
    for (int choice = 0; choice < successors; ++choice)
      best = std::max(best, of_token.merged(choice));
    sum += best;
  }
  return sum / vocabulary;
}

double markov_best_loss(int vocabulary, int steps, std::uint64_t seed) {
  const CounterRandom chain(seed, chain_stream);
  std::vector<Successors> table;
  std::vector<double> entropy;
  table.reserve(std::size_t(vocabulary));
  for (std::uint64_t token = 0; token < std::uint64_t(vocabulary); ++token) {
    table.emplace_back(chain, token, vocabulary);
    entropy.push_back(table.back().entropy_nats());
  }
  std::vector<double> token_probability(std::size_t(vocabulary), 1.0 / vocabulary), next;
  double sum = 0;
  for (int step = 0; step < steps; ++step) {
    next.assign(std::size_t(vocabulary), 0.0);
    for (std::size_t token = 0; token < table.size(); ++token) {
      sum += token_probability[token] * entropy[token];
      for (int choice = 0; choice < successors; ++choice)
        next[table[token].next[choice]] +=
            token_probability[token] * table[token].probability[choice];
    }
    token_probability.swap(next);
  }
  return sum / steps;
}

}  // namespace dlscale::workloads
