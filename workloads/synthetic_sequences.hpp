// Learnable synthetic token sequences from a fixed random Markov chain: every token has four
// successors, chosen by the seed alone (so all ranks share the chain), followed with probabilities
// 0.5, 0.25, 0.15 and 0.1. A language model can learn the chain, so its loss falls from ln(V)
// towards the chain's entropy (about 1.2 nats).
#pragma once

#include <cstdint>

#include "workloads/workload.hpp"

namespace dlscale::workloads {

// inputs: [batch x steps] token ids (as floats); labels: [batch x steps], each the next token.
HostBatch make_markov_batch(int batch, int steps, int vocabulary, std::uint64_t seed, int rank,
                            int batch_index);

// The best next-token accuracy: each token's likeliest successor, 0.5, or more where two of its
// successors are the same token (their probabilities add). The mean over tokens, each counted
// once (the chain's stationary weights differ from that by O(1/vocabulary)).
double markov_best_accuracy(int vocabulary, std::uint64_t seed);

// The best mean next-token loss (cross-entropy, nats) over a sequence of `steps` predictions: the
// chain's entropy, exactly. Predicting step t's successor from all tokens so far is no better
// than from token t alone (the chain is Markov), so the best loss there is the entropy of that
// token's successors, averaged over token t's distribution: uniform at t = 0 (the first token is
// drawn uniformly), then that distribution times the chain's transition matrix at each step.
double markov_best_loss(int vocabulary, int steps, std::uint64_t seed);

}  // namespace dlscale::workloads
