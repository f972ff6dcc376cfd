// Max or average pooling over square windows, run by the device's pooling kernel.
#pragma once

#include <memory>

#include "model/layer.hpp"

namespace dlscale::model {

class PoolingLayer final : public Layer<float> {
 public:
  PoolingLayer(kernels::Device& device, const kernels::PoolingGeometry& geometry)
      : device_(device), geometry_(geometry) {}

  std::string kind() const override {
    return geometry_.kind == kernels::PoolingKind::max ? "max_pooling" : "average_pooling";
  }
  std::size_t input_size() const override { return geometry_.input.size(); }
  std::size_t output_size() const override { return geometry_.output().size(); }

  void forward(kernels::MathOps<float>& /*math*/, int batch, const float* x, float* y) override {
    kernel().forward(batch, x, y);
  }
  void backward(kernels::MathOps<float>& /*math*/, int batch, const float* /*x*/,
                const float* /*y*/, const float* output_gradient, float* input_gradient) override {
    if (input_gradient != nullptr) kernel().backward(batch, output_gradient, input_gradient);
  }

 private:
  kernels::PoolingKernel& kernel() {
    if (!kernel_) kernel_ = device_.make_pooling(geometry_);
    return *kernel_;
  }

  kernels::Device& device_;
  kernels::PoolingGeometry geometry_;
  std::unique_ptr<kernels::PoolingKernel> kernel_;
};

}  // namespace dlscale::model
