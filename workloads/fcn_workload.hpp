// Fully connected networks (FCN-S, FCN-R and user-defined sizes): dense layers with sigmoid
// activations between them, as in the reference benchmark study.
#pragma once

#include "model/dense_layer.hpp"
#include "model/sigmoid_layer.hpp"
#include "workloads/workload.hpp"

namespace dlscale::workloads {

class FcnWorkload final : public Workload {
 public:
  // layer_sizes: input, hidden..., output (at least input and output).
  FcnWorkload(std::string name, std::vector<int> layer_sizes, int default_batch);

  std::string name() const override { return name_; }
  std::string family() const override { return "FCN"; }
  std::string description() const override;
  std::size_t parameter_count() const override;
  double training_flops_per_sample() const override;
  int default_batch() const override { return default_batch_; }
  std::size_t input_size() const override { return std::size_t(layer_sizes_.front()); }
  std::vector<model::LayerShape> layer_shapes() const override;

  std::unique_ptr<model::Network<float>> build_network(kernels::Device& device,
                                                       int batch) const override;
  HostBatch make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                       int threads = 1) const override;
  double best_accuracy(std::uint64_t seed) const override;

  // The layers in any precision: float to train, double for gradient checks.
  template <typename T>
  std::vector<std::unique_ptr<model::Layer<T>>> make_layers() const {
    std::vector<std::unique_ptr<model::Layer<T>>> layers;
    for (std::size_t i = 0; i + 1 < layer_sizes_.size(); ++i) {
      layers.push_back(
          std::make_unique<model::DenseLayer<T>>(layer_sizes_[i], layer_sizes_[i + 1]));
      if (i + 2 < layer_sizes_.size())
        layers.push_back(std::make_unique<model::SigmoidLayer<T>>(layer_sizes_[i + 1]));
    }
    return layers;
  }

 private:
  std::string name_;
  std::vector<int> layer_sizes_;
  int default_batch_;
};

// Parses "fcn:784,2048,10" (the part after "fcn:"). Throws UserError naming the spec.
std::unique_ptr<FcnWorkload> parse_fcn_spec(const std::string& spec);

}  // namespace dlscale::workloads
