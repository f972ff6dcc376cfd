// Convolutional networks (AlexNet, VGG, ResNet, MobileNet) defined by a NetworkPlan: the plan
// counts parameters, FLOPs and memory without a device, and builds the layers on one.
#pragma once

#include "workloads/network_plan.hpp"
#include "workloads/workload.hpp"

namespace dlscale::workloads {

class CnnWorkload final : public Workload {
 public:
  // `plan` must end in a dense classifier (it gives the number of classes).
  CnnWorkload(std::string name, std::string description, kernels::ImageShape input,
              const PlanBuilder& plan, int default_batch);

  std::string name() const override { return name_; }
  std::string family() const override { return "CNN"; }
  std::string description() const override { return description_; }
  std::size_t parameter_count() const override;
  double training_flops_per_sample() const override;
  int default_batch() const override { return default_batch_; }
  std::size_t input_size() const override { return input_.size(); }
  std::vector<model::LayerShape> layer_shapes() const override;

  std::unique_ptr<model::Network<float>> build_network(kernels::Device& device,
                                                       int batch) const override;
  HostBatch make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                       int threads = 1) const override;
  double best_accuracy(std::uint64_t seed) const override;

 private:
  std::string name_;
  std::string description_;
  kernels::ImageShape input_;
  std::vector<PlannedLayer> plan_;
  int classes_;
  int default_batch_;
};

}  // namespace dlscale::workloads
