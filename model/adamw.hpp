// AdamW (decoupled weight decay, as torch.optim.AdamW), beside SgdMomentum. It owns the two moment
// averages and the step counter, all in device memory: the counter advances inside each update,
// so a step captured once and replayed keeps its bias correction right.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/device_array.hpp"
#include "model/optimizer.hpp"

namespace dlscale::model {

template <typename T>
class AdamW final : public Optimizer<T> {
 public:
  AdamW(kernels::Device& device, std::size_t parameter_count, T learning_rate,
        const kernels::AdamWHyperparameters<T>& hyperparameters = {})
      : math_(device.template math<T>()),
        first_moment_(device, parameter_count),
        second_moment_(device, parameter_count),
        step_count_(device, 1),
        nonfinite_gradient_(device, 1),
        learning_rate_(learning_rate),
        hyperparameters_(hyperparameters) {
    first_moment_.copy_from_host(std::vector<T>(parameter_count, T(0)));
    second_moment_.copy_from_host(std::vector<T>(parameter_count, T(0)));
    step_count_.copy_from_host(std::vector<std::int64_t>{0});
    nonfinite_gradient_.copy_from_host(std::vector<std::int32_t>{0});
  }

  // The AdamW update of kernels::MathOps::adamw_update (Optimizer::step).
  void step(std::span<T> parameters, std::span<const T> gradients, T gradient_scale,
            double* squared_norm = nullptr) override {
    math_.adamw_update(parameters.size(), learning_rate_, hyperparameters_, gradient_scale,
                       gradients.data(), first_moment_.data(), second_moment_.data(),
                       parameters.data(), step_count_.data(), nonfinite_gradient_.data(),
                       squared_norm);
  }

  void set_learning_rate(T learning_rate) override { learning_rate_ = learning_rate; }
  T learning_rate() const override { return learning_rate_; }
  const kernels::AdamWHyperparameters<T>& hyperparameters() const { return hyperparameters_; }

  bool saw_nonfinite_gradient() const override {
    return nonfinite_gradient_.to_host().front() != 0;
  }
  // Steps taken so far, replays of captured ones included. Reads device memory.
  std::int64_t steps_taken() const { return step_count_.to_host().front(); }

 private:
  kernels::MathOps<T>& math_;
  kernels::DeviceArray<T> first_moment_;   // m, the average of the gradients
  kernels::DeviceArray<T> second_moment_;  // v, the average of their squares
  kernels::DeviceArray<std::int64_t> step_count_;
  kernels::DeviceArray<std::int32_t> nonfinite_gradient_;
  T learning_rate_;
  kernels::AdamWHyperparameters<T> hyperparameters_;
};

}  // namespace dlscale::model
