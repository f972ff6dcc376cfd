// Layer normalization of each of a sample's `steps` rows of `width` values (Ba, Kiros and Hinton
// 2016), as torch.nn.LayerNorm(width): a learned scale (starting at 1) and shift (at 0) per value.
// It keeps each row's mean and variance from forward for backward: 2 values per step and sample.
#pragma once

#include "kernels/device_array.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

template <typename T>
class LayerNormLayer final : public Layer<T> {
 public:
  static constexpr std::size_t statistics_per_row = 2;  // mean and variance

  LayerNormLayer(kernels::Device& device, int width, int steps, int max_batch)
      : width_(width),
        steps_(steps),
        mean_(device, std::size_t(max_batch) * steps),
        variance_(device, std::size_t(max_batch) * steps) {}

  std::string kind() const override { return "layer norm"; }
  std::size_t input_size() const override { return std::size_t(steps_) * width_; }
  std::size_t output_size() const override { return input_size(); }
  std::size_t parameter_count() const override { return 2 * std::size_t(width_); }
  std::size_t internal_values_per_sample() const override {
    return statistics_per_row * std::size_t(steps_);
  }

  void bind(T* parameters, T* gradients) override {
    scale_shift_ = parameters;
    scale_shift_gradient_ = gradients;
  }
  void initialize(std::span<T> host_parameters, std::uint64_t /*seed*/,
                  std::uint64_t /*layer_index*/) const override {
    for (int i = 0; i < width_; ++i) {
      host_parameters[i] = T(1);
      host_parameters[width_ + i] = T(0);
    }
  }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    math.layer_norm_forward(batch * steps_, width_, x, scale_shift_, y, mean_.data(),
                            variance_.data());
  }
  void backward(kernels::MathOps<T>& math, int batch, const T* x, const T* /*y*/,
                const T* output_gradient, T* input_gradient) override {
    // The scale and shift gradients need the input gradient's pass anyway; a first layer would
    // get a scratch buffer, but a layer norm never comes first.
    math.layer_norm_backward(batch * steps_, width_, x, scale_shift_, mean_.data(),
                             variance_.data(), output_gradient, input_gradient,
                             scale_shift_gradient_);
  }

 private:
  int width_;
  int steps_;
  kernels::DeviceArray<T> mean_;
  kernels::DeviceArray<T> variance_;
  T* scale_shift_ = nullptr;
  T* scale_shift_gradient_ = nullptr;
};

}  // namespace dlscale::model
