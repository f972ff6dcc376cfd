// Held-out evaluation: a validation set drawn from the workload's own validation stream (never
// trained on), split over the ranks of a point, and the model's accuracy and loss on it. It runs
// outside the timed step and leaves the gradients and the optimizer alone.
#pragma once

#include <cstdint>
#include <vector>

#include <mpi.h>

#include "model/network.hpp"
#include "results/run_record.hpp"
#include "worker/device_dataset.hpp"
#include "workloads/workload.hpp"

namespace dlscale::worker {

class HeldOutSet {
 public:
  // This rank's share of the first ceil(samples / batch) validation batches: batches rank,
  // rank + ranks, ... of the stream. A point with the same batch evaluates on the same samples
  // at any rank count.
  HeldOutSet(kernels::Device& device, const workloads::Workload& workload, int batch, int samples,
             std::uint64_t seed, int rank, int ranks);

  // The accuracy (argmax of each prediction's logits against its label) and mean loss over the
  // whole set, the same on every rank of `group` (collective). Sets only those two fields.
  results::Evaluation evaluate(model::Network<float>& network, MPI_Comm group) const;

 private:
  std::vector<workloads::HostBatch> host_;  // the labels, to score the logits on the host
  DeviceDataset data_;
};

}  // namespace dlscale::worker
