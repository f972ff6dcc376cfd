// Max or average pooling over square windows, run by the device's pooling kernel.
#pragma once

#include <memory>

#include "layers/layer.hpp"

namespace dlscale::kernels {

class PoolingLayer final : public Layer<float> {
 public:
  PoolingLayer(Device& device, const PoolingGeometry& geometry)
      : device_(device), geometry_(geometry) {}

  std::string kind() const override {
    return geometry_.kind == PoolingKind::max ? "max_pooling" : "average_pooling";
  }
  std::size_t input_size() const override { return geometry_.input.size(); }
  std::size_t output_size() const override { return geometry_.output().size(); }

  void forward(MathOps<float>& /*math*/, int batch, const float* x, float* y) override {
    kernel().forward(batch, x, y);
  }
  void backward(MathOps<float>& /*math*/, int batch, const float* /*x*/, const float* /*y*/,
                const float* output_gradient, float* input_gradient) override {
    if (input_gradient != nullptr) kernel().backward(batch, output_gradient, input_gradient);
  }

 private:
  PoolingKernel& kernel() {
    if (!kernel_) kernel_ = device_.make_pooling(geometry_);
    return *kernel_;
  }

  Device& device_;
  PoolingGeometry geometry_;
  std::unique_ptr<PoolingKernel> kernel_;
};

}  // namespace dlscale::kernels
