// A workload's synthetic mini-batches, made on the host and copied to the device once, before
// training, so data generation is never timed. Iterations cycle through them.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/device_array.hpp"
#include "workloads/workload.hpp"

namespace dlscale::worker {

class DeviceDataset {
 public:
  // This rank's share of the workload's synthetic data.
  DeviceDataset(kernels::Device& device, const workloads::Workload& workload, int batch,
                int distinct_batches, std::uint64_t seed, int rank)
      : batch_(batch) {
    for (int index = 0; index < distinct_batches; ++index)
      add(device, workload.make_batch(batch, seed, rank, index));
  }

  // Batches given explicitly, each of `batch` samples.
  DeviceDataset(kernels::Device& device, int batch,
                const std::vector<workloads::HostBatch>& batches)
      : batch_(batch) {
    for (const auto& batch : batches) add(device, batch);
  }

  int batch() const { return batch_; }
  std::size_t size() const { return inputs_.size(); }  // distinct batches
  const float* inputs(int iteration) const { return inputs_[slot(iteration)].data(); }
  const std::int32_t* labels(int iteration) const { return labels_[slot(iteration)].data(); }

 private:
  void add(kernels::Device& device, const workloads::HostBatch& host) {
    inputs_.emplace_back(device, host.inputs.size());
    inputs_.back().copy_from_host(host.inputs);
    labels_.emplace_back(device, host.labels.size());
    labels_.back().copy_from_host(host.labels);
  }

  std::size_t slot(int iteration) const { return std::size_t(iteration) % inputs_.size(); }

  int batch_;
  std::vector<kernels::DeviceArray<float>> inputs_;
  std::vector<kernels::DeviceArray<std::int32_t>> labels_;
};

}  // namespace dlscale::worker
