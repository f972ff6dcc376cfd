// Logistic sigmoid, y = 1 / (1 + exp(-x)); backward uses the saved output: dx = dy * y * (1 - y).
#pragma once

#include "model/layer.hpp"

namespace dlscale::model {

template <typename T>
class SigmoidLayer final : public Layer<T> {
 public:
  explicit SigmoidLayer(int size) : size_(size) {}

  std::string kind() const override { return "sigmoid"; }
  std::size_t input_size() const override { return size_; }
  std::size_t output_size() const override { return size_; }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    math.sigmoid_forward(std::size_t(batch) * size_, x, y);
  }
  void backward(kernels::MathOps<T>& math, int batch, const T* /*x*/, const T* y,
                const T* output_gradient, T* input_gradient) override {
    if (input_gradient != nullptr)
      math.sigmoid_backward(std::size_t(batch) * size_, y, output_gradient, input_gradient);
  }

 private:
  int size_;
};

}  // namespace dlscale::model
