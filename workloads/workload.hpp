// The Workload seam: a workload builds its network, makes its synthetic data, and counts its
// parameters and FLOPs. A new workload is one new class registered in workload_registry.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "model/network.hpp"

namespace dlscale::workloads {

// One mini-batch in host memory: inputs [batch x input_size] and one class label per sample.
struct HostBatch {
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
};

class Workload {
 public:
  virtual ~Workload() = default;

  virtual std::string name() const = 0;         // as given to --model
  virtual std::string family() const = 0;       // "FCN", "CNN", "RNN"
  virtual std::string description() const = 0;  // the layer structure in a few words
  virtual std::size_t parameter_count() const = 0;
  // FLOPs of one training step per sample: forward, input gradient and weight gradient (3x the
  // forward FLOPs, as docs/workloads.md counts them).
  virtual double training_flops_per_sample() const = 0;
  virtual int default_batch() const = 0;       // the per-rank CPU batch of the reference study
  virtual std::size_t input_size() const = 0;  // input values per sample
  // Tokens per sample of a language model (a sample is one sequence); 0 for other models.
  virtual int tokens_per_sample() const { return 0; }

  // The shape of each layer of the network, in order.
  virtual std::vector<model::LayerShape> layer_shapes() const = 0;

  // Device bytes the network allocates for this batch (weights, gradients, activations).
  std::size_t network_device_bytes(int batch) const {
    return model::Network<float>::device_bytes(layer_shapes(), batch);
  }
  // At most the device bytes that the kernels' bf16 copies of operands add under
  // --precision bf16 (model::Network::bf16_copy_bytes).
  std::size_t bf16_copy_bytes(int batch) const {
    return model::Network<float>::bf16_copy_bytes(layer_shapes(), batch);
  }

  virtual std::unique_ptr<model::Network<float>> build_network(kernels::Device& device,
                                                               int batch) const = 0;

  // Synthetic, learnable data, a pure function of (seed, rank, batch_index); never timed. Made on
  // up to `threads` CPUs where the workload's data is costly to make (the same values on any
  // number): the set-up passes the rank's CPUs, a batch made between iterations passes 1, so that
  // no burst of threads runs beside training.
  virtual HostBatch make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                               int threads = 1) const = 0;

  // Held-out data from the same task: the stream of a rank that no launch has, so never trained
  // on. Every rank of every point draws the same batches for the same batch size.
  HostBatch make_validation_batch(int batch, std::uint64_t seed, int batch_index) const {
    return make_batch(batch, seed, validation_stream_rank, batch_index);
  }
  static constexpr int validation_stream_rank = std::numeric_limits<int>::max();

  // The best accuracy any model can reach on held-out data (the Bayes classifier's) with this
  // seed's task, or NaN where it is not known; docs/workloads.md derives each.
  virtual double best_accuracy(std::uint64_t seed) const = 0;
  // The best mean loss (nats) any model can reach on held-out data with this seed's task, or NaN
  // where it is not known; docs/workloads.md derives each.
  virtual double best_loss(std::uint64_t /*seed*/) const {
    return std::numeric_limits<double>::quiet_NaN();
  }
  // True where one layer uses another's parameters (an output head tied to the token embedding):
  // fully sharded training, which gathers each unit of layers only around its own layers, cannot
  // run such a network.
  virtual bool layers_share_parameters() const { return false; }
};

}  // namespace dlscale::workloads
