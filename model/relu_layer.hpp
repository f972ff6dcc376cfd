// Rectified linear unit, y = max(x, 0), optionally capped (ReLU6, MobileNet v2's activation:
// min(max(x, 0), 6)); backward passes dy where the output was strictly inside (0, ceiling).
#pragma once

#include <limits>

#include "model/layer.hpp"

namespace dlscale::model {

template <typename T>
class ReluLayer final : public Layer<T> {
 public:
  explicit ReluLayer(std::size_t size, T ceiling = std::numeric_limits<T>::infinity())
      : size_(size), ceiling_(ceiling) {}

  std::string kind() const override { return ceiling_ == T(6) ? "relu6" : "relu"; }
  std::size_t input_size() const override { return size_; }
  std::size_t output_size() const override { return size_; }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    math.relu_forward(std::size_t(batch) * size_, ceiling_, x, y);
  }
  void backward(kernels::MathOps<T>& math, int batch, const T* /*x*/, const T* y,
                const T* output_gradient, T* input_gradient) override {
    if (input_gradient != nullptr)
      math.relu_backward(std::size_t(batch) * size_, ceiling_, y, output_gradient, input_gradient);
  }

 private:
  std::size_t size_;
  T ceiling_;
};

}  // namespace dlscale::model
