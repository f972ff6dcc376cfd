// SGD with momentum, the optimizer of every dlscale workload. It owns the velocity buffer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/device_array.hpp"

namespace dlscale::model {

template <typename T>
class SgdMomentum {
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

  // gradient_scale turns an allreduced sum into the mean over ranks (1 / ranks). Where
  // squared_norm (device memory) is given, the same pass writes the scaled gradient's squared
  // norm to it.
  void step(std::span<T> parameters, std::span<const T> gradients, T gradient_scale,
            double* squared_norm = nullptr) {
    math_.sgd_momentum_update(parameters.size(), learning_rate_, momentum_, gradient_scale,
                              gradients.data(), velocity_.data(), parameters.data(),
                              nonfinite_gradient_.data(), squared_norm);
  }

  // The rate of the following steps. A captured step keeps the rate it was captured with.
  void set_learning_rate(T learning_rate) { learning_rate_ = learning_rate; }
  T learning_rate() const { return learning_rate_; }

  // Whether any step so far was given a NaN or infinite gradient. Reads device memory: call it
  // once the steps are done.
  bool saw_nonfinite_gradient() const { return nonfinite_gradient_.to_host().front() != 0; }

 private:
  kernels::MathOps<T>& math_;
  kernels::DeviceArray<T> velocity_;
  kernels::DeviceArray<std::int32_t> nonfinite_gradient_;
  T learning_rate_;
  T momentum_;
};

}  // namespace dlscale::model
