// Learnable synthetic classification data shared by the workloads: each class has a fixed random
// prototype (depending on the seed only, so all ranks agree on it) and each sample is its class's
// prototype plus Gaussian noise. Labels are uniform. A network learns it, so the loss falls.
#pragma once

#include <cstdint>

#include "workloads/workload.hpp"

namespace dlscale::workloads {

// Rank `rank`'s mini-batch number `batch_index`: inputs [batch x input_size], one label each,
// made on up to `threads` CPUs (the same values on any number).
HostBatch make_prototype_batch(int batch, int input_size, int classes, std::uint64_t seed, int rank,
                               int batch_index, int threads = 1);

// The Bayes accuracy of the task: nearest prototype, as the classes are equally likely and the
// noise is the same isotropic Gaussian for each. Two prototypes are about sqrt(2 x input_size)
// noise deviations apart, so from 64 inputs on a sample lands nearer another class's prototype
// with probability below Phi(-sqrt(32)), 8e-9 per class: 1 to the precision anyone trains to.
// NaN below 64 inputs (not derived).
double prototype_best_accuracy(int input_size);

}  // namespace dlscale::workloads
