// GELU in its tanh form, GPT-2's activation (Hendrycks and Gimpel 2016): y = x/2 (1 + tanh(
// sqrt(2/pi) (x + 0.044715 x^3))); backward reads the forward's input x.
#pragma once

#include "model/layer.hpp"

namespace dlscale::model {

template <typename T>
class GeluLayer final : public Layer<T> {
 public:
  explicit GeluLayer(std::size_t size) : size_(size) {}

  std::string kind() const override { return "gelu"; }
  std::size_t input_size() const override { return size_; }
  std::size_t output_size() const override { return size_; }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    math.gelu_forward(std::size_t(batch) * size_, x, y);
  }
  void backward(kernels::MathOps<T>& math, int batch, const T* x, const T* /*y*/,
                const T* output_gradient, T* input_gradient) override {
    if (input_gradient != nullptr)
      math.gelu_backward(std::size_t(batch) * size_, x, output_gradient, input_gradient);
  }

 private:
  std::size_t size_;
};

}  // namespace dlscale::model
