// Batch normalization of an image tensor in training mode, with a learned per-channel scale
// (starting at 1) and shift (starting at 0), and optionally the ReLU after it, run by the
// device's batch-norm kernel.
#pragma once

#include <memory>

#include "model/layer.hpp"

namespace dlscale::model {

class BatchNormLayer final : public Layer<float> {
 public:
  BatchNormLayer(kernels::Device& device, const kernels::BatchNormGeometry& geometry)
      : device_(device), geometry_(geometry), shape_(geometry.shape) {}

  std::string kind() const override { return geometry_.relu ? "batch_norm_relu" : "batch_norm"; }
  std::size_t input_size() const override { return shape_.size(); }
  std::size_t output_size() const override { return shape_.size(); }
  std::size_t parameter_count() const override { return 2 * std::size_t(shape_.channels); }

  void bind(float* parameters, float* gradients) override {
    scale_ = parameters;
    shift_ = parameters + shape_.channels;
    scale_gradient_ = gradients;
    shift_gradient_ = gradients + shape_.channels;
  }
  void initialize(std::span<float> host_parameters, std::uint64_t /*seed*/,
                  std::uint64_t /*layer_index*/) const override {
    for (int c = 0; c < shape_.channels; ++c) {
      host_parameters[c] = 1;
      host_parameters[shape_.channels + c] = 0;
    }
  }

  void forward(kernels::MathOps<float>& /*math*/, int batch, const float* x, float* y) override {
    kernel().forward(batch, x, scale_, shift_, y);
  }
  void backward(kernels::MathOps<float>& /*math*/, int batch, const float* x, const float* /*y*/,
                const float* output_gradient, float* input_gradient) override {
    kernel().backward(batch, x, scale_, shift_, output_gradient, input_gradient, scale_gradient_,
                      shift_gradient_);
  }

 private:
  kernels::BatchNormKernel& kernel() {
    if (!kernel_) kernel_ = device_.make_batch_norm(geometry_);
    return *kernel_;
  }

  kernels::Device& device_;
  kernels::BatchNormGeometry geometry_;
  kernels::ImageShape shape_;
  std::unique_ptr<kernels::BatchNormKernel> kernel_;
  float* scale_ = nullptr;
  float* shift_ = nullptr;
  float* scale_gradient_ = nullptr;
  float* shift_gradient_ = nullptr;
};

}  // namespace dlscale::model
