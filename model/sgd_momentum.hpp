// SGD with momentum, the optimizer of every dlscale workload. It owns the velocity buffer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/device_array.hpp"
#include "model/optimizer.hpp"

namespace dlscale::model {

template <typename T>
class SgdMomentum final : public Optimizer<T> {
 public:
  SgdMomentum(kernels::Device& device, std::size_t parameter_count, T learning_rate, T momentum)
      : math_(device.template math<T>()),
        velocity_(device, parameter_count),
        nonfinite_gradient_(device, 1),
        learning_rate_(learning_rate),
        momentum_(momentum) {
    velocity_.copy_from_host(std::vector<T>(parameter_count, T(0)));
    nonfinite_gradient_.copy_from_host(std::vector<std::int32_t>{0});
  }

  // v = momentum * v + gradient_scale * g; p -= learning_rate * v (Optimizer::step).
  void step(std::span<T> parameters, std::span<const T> gradients, T gradient_scale,
            double* squared_norm = nullptr) override {
    math_.sgd_momentum_update(parameters.size(), learning_rate_, momentum_, gradient_scale,
                              gradients.data(), velocity_.data(), parameters.data(),
                              nonfinite_gradient_.data(), squared_norm);
  }

  void set_learning_rate(T learning_rate) override { learning_rate_ = learning_rate; }
  T learning_rate() const override { return learning_rate_; }

  bool saw_nonfinite_gradient() const override {
    return nonfinite_gradient_.to_host().front() != 0;
  }

 private:
  kernels::MathOps<T>& math_;
  kernels::DeviceArray<T> velocity_;
  kernels::DeviceArray<std::int32_t> nonfinite_gradient_;
  T learning_rate_;
  T momentum_;
};

}  // namespace dlscale::model
