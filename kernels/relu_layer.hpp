// Rectified linear unit, y = max(x, 0); backward passes dy where the output was positive.
#pragma once

#include "kernels/layer.hpp"

namespace dlscale::kernels {

template <typename T>
class ReluLayer final : public Layer<T> {
 public:
  explicit ReluLayer(std::size_t size) : size_(size) {}

  std::string kind() const override { return "relu"; }
  std::size_t input_size() const override { return size_; }
  std::size_t output_size() const override { return size_; }

  void forward(MathOps<T>& math, int batch, const T* x, T* y) override {
    math.relu_forward(std::size_t(batch) * size_, x, y);
  }
  void backward(MathOps<T>& math, int batch, const T* /*x*/, const T* y,
                const T* output_gradient, T* input_gradient) override {
    if (input_gradient != nullptr)
      math.relu_backward(std::size_t(batch) * size_, y, output_gradient, input_gradient);
  }

 private:
  std::size_t size_;
};

}  // namespace dlscale::kernels
