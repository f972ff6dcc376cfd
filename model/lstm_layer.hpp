// One LSTM layer over the whole sequence, run by the device's LSTM kernel, or a stack of them in
// one kernel where the device runs stacks (Device::runs_lstm_stacks). Weights and biases start as
// PyTorch's do: U(-a, a) with a = 1 / sqrt(hidden).
#pragma once

#include <cmath>
#include <memory>

#include "core/parallel_fill.hpp"
#include "core/random.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

class LstmLayer final : public Layer<float> {
 public:
  LstmLayer(kernels::Device& device, const kernels::LstmGeometry& geometry)
      : device_(device), geometry_(geometry) {}

  std::string kind() const override { return "lstm"; }
  std::size_t input_size() const override {
    return std::size_t(geometry_.steps) * geometry_.inputs;
  }
  std::size_t output_size() const override {
    return std::size_t(geometry_.steps) * geometry_.hidden;
  }
  std::size_t parameter_count() const override { return geometry_.parameter_count(); }
  double forward_flops_per_sample() const override { return geometry_.forward_flops_per_sample(); }

  void bind(float* parameters, float* gradients) override {
    parameters_ = parameters;
    gradients_ = gradients;
  }
  // Each layer of a stack from its own stream, as it would be initialized alone.
  void initialize(std::span<float> host_parameters, std::uint64_t seed,
                  std::uint64_t layer_index) const override {
    const double limit = 1.0 / std::sqrt(double(geometry_.hidden));
    std::size_t offset = 0;
    for (int layer = 0; layer < geometry_.layers; ++layer) {
      const CounterRandom random(seed, layer_index + std::uint64_t(layer));
      const auto block =
          host_parameters.subspan(offset, geometry_.layer(layer).layer_parameter_count());
      fill_in_parallel(block,
                       [&](std::size_t i) { return float((2 * random.uniform(i) - 1) * limit); });
      offset += block.size();
    }
  }
  std::uint64_t random_streams() const override { return std::uint64_t(geometry_.layers); }

  void forward(kernels::MathOps<float>& /*math*/, int batch, const float* x, float* y) override {
    kernel().forward(batch, x, parameters_, y);
  }
  void backward(kernels::MathOps<float>& /*math*/, int batch, const float* x, const float* y,
                const float* output_gradient, float* input_gradient) override {
    kernel().backward(batch, x, parameters_, y, output_gradient, input_gradient, gradients_);
  }

 private:
  kernels::LstmKernel& kernel() {
    if (!kernel_) kernel_ = device_.make_lstm(geometry_);
    return *kernel_;
  }

  kernels::Device& device_;
  kernels::LstmGeometry geometry_;
  std::unique_ptr<kernels::LstmKernel> kernel_;
  float* parameters_ = nullptr;
  float* gradients_ = nullptr;
};

}  // namespace dlscale::model
