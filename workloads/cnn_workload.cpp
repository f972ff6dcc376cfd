// CNN workloads: planned layers, built on a device, trained on prototype-plus-noise images.
#include "workloads/cnn_workload.hpp"

#include <stdexcept>

#include "workloads/synthetic_classification.hpp"

namespace dlscale::workloads {

CnnWorkload::CnnWorkload(std::string name, std::string description, kernels::ImageShape input,
                         const PlanBuilder& plan, int default_batch)
    : name_(std::move(name)),
      description_(std::move(description)),
      input_(input),
      plan_(plan.layers()),
      classes_(plan.outputs()),
      default_batch_(default_batch) {
  if (classes_ < 2) throw std::invalid_argument(name_ + " must end in a dense classifier");
}

std::size_t CnnWorkload::parameter_count() const {
  std::size_t count = 0;
  for (const auto& layer : plan_) count += shape_of(layer).parameter_count;
  return count;
}

double CnnWorkload::training_flops_per_sample() const {
  double forward = 0;
  for (const auto& layer : plan_) forward += forward_flops_of(layer);
  return 3 * forward;
}

std::vector<model::LayerShape> CnnWorkload::layer_shapes() const {
  std::vector<model::LayerShape> shapes;
  for (const auto& layer : plan_) shapes.push_back(shape_of(layer));
  return shapes;
}

std::unique_ptr<model::Network<float>> CnnWorkload::build_network(kernels::Device& device,
                                                                  int batch) const {
  std::vector<std::unique_ptr<model::Layer<float>>> layers;
  for (const auto& layer : plan_) layers.push_back(build_layer(device, layer, batch));
  return std::make_unique<model::Network<float>>(device, std::move(layers), batch);
}

HostBatch CnnWorkload::make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                                  int threads) const {
  return make_prototype_batch(batch, int(input_.size()), classes_, seed, rank, batch_index,
                              threads);
}

double CnnWorkload::best_accuracy(std::uint64_t /*seed*/) const {
  return prototype_best_accuracy(int(input_.size()));
}

}  // namespace dlscale::workloads
