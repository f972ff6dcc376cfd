// The optimizer seam: what the training loop asks of an optimizer, whichever it is (SgdMomentum,
// AdamW). An optimizer owns its state in device memory and updates the flat parameter buffer from
// the flat gradient buffer in one fused pass per step.
#pragma once

#include <span>

namespace dlscale::model {

template <typename T>
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // One update. gradient_scale turns an allreduced sum into the mean over ranks (1 / ranks).
  // Where squared_norm (device memory) is not null, the same pass writes the scaled gradient's
  // squared norm to it.
  virtual void step(std::span<T> parameters, std::span<const T> gradients, T gradient_scale,
                    double* squared_norm) = 0;

  // The rate of the following steps. A captured step keeps the rate it was captured with.
  virtual void set_learning_rate(T learning_rate) = 0;
  virtual T learning_rate() const = 0;

  // Whether any step so far was given a NaN or infinite gradient. Reads device memory: call it
  // once the steps are done.
  virtual bool saw_nonfinite_gradient() const = 0;
};

}  // namespace dlscale::model
