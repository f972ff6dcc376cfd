// A workload's synthetic mini-batches, made on the host and copied to the device, never inside a
// timed phase. Iterations cycle through them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "core/host_info.hpp"
#include "kernels/device_array.hpp"
#include "workloads/workload.hpp"

namespace dlscale::worker {

class DeviceDataset {
 public:
  // This rank's share of the workload's synthetic data. The device memory of every batch is
  // taken here (so a point that does not fit fails in its set-up), but only the first
  // `made_before_training` batches are made: a point trained to a target cycles through thousands,
  // whose making took tens of seconds of set-up in which a stop signal went unheeded. The others
  // are made by prepare(), between iterations; a batch is the same whenever it is made.
  DeviceDataset(kernels::Device& device, const workloads::Workload& workload, int batch,
                int distinct_batches, std::uint64_t seed, int rank)
      : batch_(batch), workload_(&workload), seed_(seed), rank_(rank) {
    // Every batch of a workload has the first one's sizes. The set-up makes them on every CPU
    // the rank may use; prepare(), between iterations, on one.
    const int threads = std::max(allowed_cpu_count(), 1);
    const workloads::HostBatch first = workload.make_batch(batch, seed, rank, 0, threads);
    for (int index = 0; index < distinct_batches; ++index) {
      inputs_.emplace_back(device, first.inputs.size());
      labels_.emplace_back(device, first.labels.size());
    }
    inputs_.front().copy_from_host(first.inputs);
    labels_.front().copy_from_host(first.labels);
    made_.assign(inputs_.size(), false);
    made_.front() = true;
    for (int index = 1; index < std::min(distinct_batches, made_before_training); ++index)
      make(std::size_t(index), threads);
  }

  // Batches given explicitly, each of `batch` samples.
  DeviceDataset(kernels::Device& device, int batch,
                const std::vector<workloads::HostBatch>& batches)
      : batch_(batch) {
    for (const auto& host : batches) {
      inputs_.emplace_back(device, host.inputs.size());
      inputs_.back().copy_from_host(host.inputs);
      labels_.emplace_back(device, host.labels.size());
      labels_.back().copy_from_host(host.labels);
    }
    made_.assign(inputs_.size(), true);
  }

  int batch() const { return batch_; }
  std::size_t size() const { return inputs_.size(); }  // distinct batches
  // Batches made so far, from the first: those an untimed probe may cycle through.
  std::size_t made_batches() const {
    return std::size_t(std::count(made_.begin(), made_.end(), true));
  }

  // Makes the batch `iteration` uses, where it is not made yet; returns the seconds that took
  // (0 where it was made). Call it outside the timed phases. Const: the batch it makes is the one
  // the dataset stands for; only when it is made changes.
  double prepare(int iteration) const {
    if (made_[slot(iteration)]) return 0;
    const auto start = std::chrono::steady_clock::now();
    make(slot(iteration));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  const float* inputs(int iteration) const {
    prepare(iteration);
    return inputs_[slot(iteration)].data();
  }
  const std::int32_t* labels(int iteration) const {
    prepare(iteration);
    return labels_[slot(iteration)].data();
  }

 private:
  // At least what the warm-up, the node-sharing probe and a captured step cycle through at first.
  static constexpr int made_before_training = 8;

  void make(std::size_t index, int threads = 1) const {
    const workloads::HostBatch host =
        workload_->make_batch(batch_, seed_, rank_, int(index), threads);
    inputs_[index].copy_from_host(host.inputs);
    labels_[index].copy_from_host(host.labels);
    made_[index] = true;
  }

  std::size_t slot(int iteration) const { return std::size_t(iteration) % inputs_.size(); }

  int batch_;
  const workloads::Workload* workload_ = nullptr;  // null for batches given explicitly
  std::uint64_t seed_ = 0;
  int rank_ = 0;
  mutable std::vector<kernels::DeviceArray<float>> inputs_;
  mutable std::vector<kernels::DeviceArray<std::int32_t>> labels_;
  mutable std::vector<bool> made_;
};

}  // namespace dlscale::worker
