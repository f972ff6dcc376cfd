// Sequential convolutional networks (AlexNet-R, AlexNet-S, VGG-16): convolutions, ReLU, pooling
// and fully connected layers in a row. A network is first planned as a list of layer geometries
// (enough to count parameters, FLOPs and memory without any device), then built on a device.
#pragma once

#include <variant>

#include "kernels/image_kernels.hpp"
#include "workloads/workload.hpp"

namespace dlscale::workloads {

// One step of a sequential CNN, as the registry writes it.
struct CnnStep {
  enum class Kind { convolution, relu, max_pool, average_pool, dense };
  Kind kind;
  int size = 0;  // output channels (convolution) or outputs (dense)
  int kernel = 0, stride = 1, padding = 0;
};

CnnStep convolution(int output_channels, int kernel, int stride = 1, int padding = 0);
CnnStep relu();
CnnStep max_pool(int kernel, int stride, int padding = 0);
CnnStep dense(int outputs);

// A step with its input shape resolved.
struct PlannedRelu {
  std::size_t size;
};
struct PlannedDense {
  int inputs, outputs;
};
using PlannedLayer =
    std::variant<kernels::ConvolutionGeometry, kernels::PoolingGeometry, PlannedRelu, PlannedDense>;

class CnnWorkload final : public Workload {
 public:
  // Throws std::invalid_argument if a step does not fit its input (a registry mistake).
  CnnWorkload(std::string name, std::string description, kernels::ImageShape input,
              std::vector<CnnStep> steps, int default_batch);

  std::string name() const override { return name_; }
  std::string family() const override { return "CNN"; }
  std::string description() const override { return description_; }
  std::size_t parameter_count() const override;
  double training_flops_per_sample() const override;
  int default_batch() const override { return default_batch_; }
  std::size_t input_size() const override { return input_.size(); }
  std::size_t network_device_bytes(int batch) const override;

  std::unique_ptr<kernels::Network<float>> build_network(kernels::Device& device,
                                                         int batch) const override;
  HostBatch make_batch(int batch, std::uint64_t seed, int rank, int batch_index) const override;

  const std::vector<PlannedLayer>& plan() const { return plan_; }

 private:
  std::string name_;
  std::string description_;
  kernels::ImageShape input_;
  std::vector<PlannedLayer> plan_;
  int classes_ = 0;
  int default_batch_;
};

}  // namespace dlscale::workloads
