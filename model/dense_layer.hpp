// Fully connected layer, y = x W^T + b, with W stored [out x in] as PyTorch does. With timesteps
// > 1 it is applied to every step of a sequence ([B x steps x in] -> [B x steps x out]), B below
// then standing for B * steps rows.
//   forward:  y[B x out]  = x[B x in] * W^T
//   backward: dW[out x in] = dy^T[out x B] * x[B x in];  db = column sums of dy
//             dx[B x in]  = dy[B x out] * W[out x in]
// FLOPs: 2 * in * out per sample forward, 6 * in * out for the training step.
#pragma once

#include <cmath>

#include "core/parallel_fill.hpp"
#include "core/random.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

template <typename T>
class DenseLayer final : public Layer<T> {
 public:
  DenseLayer(int inputs, int outputs, int timesteps = 1)
      : inputs_(inputs), outputs_(outputs), timesteps_(timesteps) {}

  std::string kind() const override { return "dense"; }
  std::size_t input_size() const override { return std::size_t(timesteps_) * inputs_; }
  std::size_t output_size() const override { return std::size_t(timesteps_) * outputs_; }
  std::size_t parameter_count() const override {
    return std::size_t(outputs_) * inputs_ + outputs_;
  }
  double forward_flops_per_sample() const override { return 2.0 * timesteps_ * inputs_ * outputs_; }

  void bind(T* parameters, T* gradients) override {
    weights_ = parameters;
    bias_ = parameters + std::size_t(outputs_) * inputs_;
    weight_gradient_ = gradients;
    bias_gradient_ = gradients + std::size_t(outputs_) * inputs_;
  }

  // Glorot-uniform weights, suited to the sigmoid networks of the benchmark; zero bias.
  void initialize(std::span<T> host_parameters, std::uint64_t seed,
                  std::uint64_t layer_index) const override {
    const CounterRandom random(seed, layer_index);
    const double limit = std::sqrt(6.0 / (inputs_ + outputs_));
    const std::size_t weight_count = std::size_t(outputs_) * inputs_;
    fill_in_parallel(host_parameters.first(weight_count),
                     [&](std::size_t i) { return T((2 * random.uniform(i) - 1) * limit); });
    for (std::size_t i = weight_count; i < host_parameters.size(); ++i) host_parameters[i] = T(0);
  }

  void forward(kernels::MathOps<T>& math, int samples, const T* x, T* y) override {
    const int batch = samples * timesteps_;
    math.linear_forward(batch, inputs_, outputs_, x, weights_, bias_, y);
  }

  void backward(kernels::MathOps<T>& math, int samples, const T* x, const T* /*y*/,
                const T* output_gradient, T* input_gradient) override {
    math.linear_backward(samples * timesteps_, inputs_, outputs_, x, weights_, output_gradient,
                         weight_gradient_, bias_gradient_, input_gradient);
  }

 private:
  int inputs_;
  int outputs_;
  int timesteps_;
  T* weights_ = nullptr;
  T* bias_ = nullptr;
  T* weight_gradient_ = nullptr;
  T* bias_gradient_ = nullptr;
};

}  // namespace dlscale::model
