// Image kernels for a float network that compute in double with the reference oracles
// (reference_image_kernels.hpp) and round only what they write: each output is the float nearest
// its exact value for the float inputs it was given. No float implementation of a layer can do
// better, so a network run on them is the yardstick that other devices' float gradients are held
// to (tests/workloads/float_gradient_conditioning_test.cpp). Plain NCHW whatever the geometry's
// layouts say, on host memory (the CPU device's). Test oracles only: slow plain loops.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/image_kernels.hpp"
#include "tests/kernels/reference_image_kernels.hpp"

namespace dlscale::testing {

inline std::vector<double> widened(const float* values, std::size_t count) {
  return values == nullptr ? std::vector<double>(count)
                           : std::vector<double>(values, values + count);
}

inline void narrow_into(const std::vector<double>& values, float* out) {
  if (out != nullptr)
    std::transform(values.begin(), values.end(), out, [](double v) { return float(v); });
}

class ExactConvolution final : public kernels::ConvolutionKernel {
 public:
  explicit ExactConvolution(const kernels::ConvolutionGeometry& geometry) : g_(geometry) {}

  void forward(int batch, const float* x, const float* weights, const float* bias,
               float* y) override {
    narrow_into(
        reference::convolution_forward(
            g_, batch, widened(x, batch * g_.input.size()), widened(weights, g_.weight_count()),
            widened(g_.bias ? bias : nullptr, g_.bias ? g_.output_channels : 0)),
        y);
  }
  void backward(int batch, const float* x, const float* weights, const float* y,
                const float* output_gradient, float* input_gradient, float* weight_gradient,
                float* bias_gradient) override {
    const std::size_t output_count = batch * g_.output().size();
    std::vector<double> dy = widened(output_gradient, output_count);
    if (g_.relu) dy = reference::relu_masked(std::move(dy), widened(y, output_count));
    const auto gradients = reference::convolution_backward(
        g_, batch, widened(x, batch * g_.input.size()), widened(weights, g_.weight_count()), dy);
    narrow_into(gradients.input, input_gradient);
    narrow_into(gradients.weights, weight_gradient);
    if (g_.bias) narrow_into(gradients.bias, bias_gradient);
  }

 private:
  kernels::ConvolutionGeometry g_;
};

class ExactPooling final : public kernels::PoolingKernel {
 public:
  explicit ExactPooling(const kernels::PoolingGeometry& geometry) : g_(geometry) {}

  void forward(int batch, const float* x, float* y) override {
    x_ = widened(x, batch * g_.input.size());  // backward needs where the maxima were
    batch_ = batch;
    narrow_into(reference::pooling_forward(g_, batch, x_), y);
  }
  void backward(int batch, const float* output_gradient, float* input_gradient) override {
    narrow_into(reference::pooling_backward(g_, batch_, x_,
                                            widened(output_gradient, batch * g_.output().size())),
                input_gradient);
  }

 private:
  kernels::PoolingGeometry g_;
  std::vector<double> x_;
  int batch_ = 0;
};

class ExactBatchNorm final : public kernels::BatchNormKernel {
 public:
  explicit ExactBatchNorm(const kernels::BatchNormGeometry& geometry) : g_(geometry) {}

  void forward(int batch, const float* x, const float* scale, const float* shift,
               float* y) override {
    const std::size_t count = batch * g_.shape.size();
    auto output =
        reference::batch_norm(g_.shape, batch, widened(x, count), widened(scale, g_.shape.channels),
                              widened(shift, g_.shape.channels), std::vector<double>(count))
            .output;
    if (g_.relu)
      for (double& value : output) value = std::max(value, 0.0);
    output_ = output;  // the ReLU's mask for backward
    narrow_into(output, y);
  }
  void backward(int batch, const float* x, const float* scale, const float* shift,
                const float* output_gradient, float* input_gradient, float* scale_gradient,
                float* shift_gradient) override {
    const std::size_t count = batch * g_.shape.size();
    std::vector<double> dy = widened(output_gradient, count);
    if (g_.relu)
      for (std::size_t i = 0; i < count; ++i)
        if (output_[i] <= 0) dy[i] = 0;
    const auto result =
        reference::batch_norm(g_.shape, batch, widened(x, count), widened(scale, g_.shape.channels),
                              widened(shift, g_.shape.channels), dy);
    narrow_into(result.input_gradient, input_gradient);
    narrow_into(result.scale_gradient, scale_gradient);
    narrow_into(result.shift_gradient, shift_gradient);
  }

 private:
  kernels::BatchNormGeometry g_;
  std::vector<double> output_;
};

}  // namespace dlscale::testing
