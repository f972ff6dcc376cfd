// Rectified linear unit, y = max(x, 0), optionally capped (ReLU6, MobileNet v2's activation:
// min(max(x, 0), 6)); backward passes dy where the output was strictly inside (0, ceiling).
#pragma once

#include <limits>

#include "model/layer.hpp"

namespace dlscale::model {

template <typename T>
class ReluLayer final : public Layer<T> {
 public:
  // native_image: x and y are images in ImageLayout::native, which the device may hold in
  // another element type (MathOps::native_image_relu_forward).
  explicit ReluLayer(std::size_t size, T ceiling = std::numeric_limits<T>::infinity(),
                     bool native_image = false)
      : size_(size), ceiling_(ceiling), native_image_(native_image) {}

  std::string kind() const override { return ceiling_ == T(6) ? "relu6" : "relu"; }
  std::size_t input_size() const override { return size_; }
  std::size_t output_size() const override { return size_; }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    const std::size_t count = std::size_t(batch) * size_;
    if (native_image_)
      math.native_image_relu_forward(count, ceiling_, x, y);
    else
      math.relu_forward(count, ceiling_, x, y);
  }
  void backward(kernels::MathOps<T>& math, int batch, const T* /*x*/, const T* y,
                const T* output_gradient, T* input_gradient) override {
    if (input_gradient == nullptr) return;
    const std::size_t count = std::size_t(batch) * size_;
    if (native_image_)
      math.native_image_relu_backward(count, ceiling_, y, output_gradient, input_gradient);
    else
      math.relu_backward(count, ceiling_, y, output_gradient, input_gradient);
  }

 private:
  std::size_t size_;
  T ceiling_;
  bool native_image_;
};

}  // namespace dlscale::model
