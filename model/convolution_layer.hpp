// 2-D convolution with stride, padding and groups, y = conv(x, W) + b, run by the device's
// convolution kernel (oneDNN on the CPU). Weights and bias start as PyTorch's default does:
// U(-a, a) with a = 1 / sqrt(fan_in), fan_in = Cin/groups * K * K, so deep plain (no batch norm)
// networks such as VGG-16 start with a loss near ln(classes) rather than diverging.
// With the geometry's relu, y = max(conv(x, W) + b, 0) from the kernel in one pass, and the
// kernel's backward masks dy where y is 0 (kernels/image_kernels.hpp).
#pragma once

#include <cmath>
#include <memory>

#include "core/parallel_fill.hpp"
#include "core/random.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

class ConvolutionLayer final : public Layer<float> {
 public:
  // The kernel is made on first use, so a layer list can be built to be counted or planned.
  ConvolutionLayer(kernels::Device& device, const kernels::ConvolutionGeometry& geometry)
      : device_(device), geometry_(geometry) {}

  std::string kind() const override { return geometry_.relu ? "convolution_relu" : "convolution"; }
  std::size_t internal_values_per_sample() const override { return internal_values_of(geometry_); }
  // Per sample: a fused ReLU's masked gradient, which the kernel may keep (the CPU's and the
  // legacy cuDNN path's do; the graph path's goes to its bf16 staging); for plans made before
  // any layer is.
  static std::size_t internal_values_of(const kernels::ConvolutionGeometry& geometry) {
    return geometry.relu ? geometry.output().size() : 0;
  }
  std::size_t input_size() const override { return geometry_.input.size(); }
  std::size_t output_size() const override { return geometry_.output().size(); }
  std::size_t parameter_count() const override { return geometry_.parameter_count(); }
  double forward_flops_per_sample() const override { return geometry_.forward_flops_per_sample(); }

  void bind(float* parameters, float* gradients) override {
    weights_ = parameters;
    weight_gradient_ = gradients;
    if (geometry_.bias) {
      bias_ = parameters + geometry_.weight_count();
      bias_gradient_ = gradients + geometry_.weight_count();
    }
  }

  void initialize(std::span<float> host_parameters, std::uint64_t seed,
                  std::uint64_t layer_index) const override {
    const CounterRandom random(seed, layer_index);
    const double fan_in = double(geometry_.weight_count()) / geometry_.output_channels;
    const double limit = 1.0 / std::sqrt(fan_in);
    fill_in_parallel(host_parameters,
                     [&](std::size_t i) { return float((2 * random.uniform(i) - 1) * limit); });
  }

  void forward(kernels::MathOps<float>& /*math*/, int batch, const float* x, float* y) override {
    kernel().forward(batch, x, weights_, bias_, y);
  }
  void backward(kernels::MathOps<float>& /*math*/, int batch, const float* x, const float* y,
                const float* output_gradient, float* input_gradient) override {
    kernel().backward(batch, x, weights_, y, output_gradient, input_gradient, weight_gradient_,
                      bias_gradient_);
  }

 private:
  kernels::ConvolutionKernel& kernel() {
    if (!kernel_) kernel_ = device_.make_convolution(geometry_);
    return *kernel_;
  }

  kernels::Device& device_;
  kernels::ConvolutionGeometry geometry_;
  std::unique_ptr<kernels::ConvolutionKernel> kernel_;
  float* weights_ = nullptr;
  float* bias_ = nullptr;
  float* weight_gradient_ = nullptr;
  float* bias_gradient_ = nullptr;
};

}  // namespace dlscale::model
