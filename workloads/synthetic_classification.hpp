// Learnable synthetic classification data shared by the workloads: each class has a fixed random
// prototype (depending on the seed only, so all ranks agree on it) and each sample is its class's
// prototype plus Gaussian noise. Labels are uniform. A network learns it, so the loss falls.
#pragma once

#include <cstdint>

#include "workloads/workload.hpp"

namespace dlscale::workloads {

// Rank `rank`'s mini-batch number `batch_index`: inputs [batch x input_size], one label each.
HostBatch make_prototype_batch(int batch, int input_size, int classes, std::uint64_t seed, int rank,
                               int batch_index);

}  // namespace dlscale::workloads
