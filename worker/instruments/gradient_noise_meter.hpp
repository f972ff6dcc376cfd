// The gradient noise scale's two squared norms in every multi-rank step (analysis/
// gradient_noise_scale): each rank's own gradient, read per bucket before its sum across ranks,
// and the summed gradient's, from the update's own pass over it. They are read at every step of
// the warm-up, then every k-th step, k chosen so they cost at most 0.4% of a step on average.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "comm/gradient_communicator.hpp"
#include "kernels/device.hpp"
#include "kernels/device_array.hpp"
#include "worker/instruments/step_instrument.hpp"

namespace dlscale::worker {

class GradientNoiseMeter : public StepInstrument {
 public:
  // Without `update_sees_every_gradient` (--sharding) the series are absent, with the reason.
  GradientNoiseMeter(kernels::Device& device, comm::GradientCommunicator& communicator,
                     int warmup_iterations, bool update_sees_every_gradient = true);

  void start(std::size_t summed_buckets) override;
  bool reads_at(int iteration) const override;
  const kernels::DeviceEvent* before_bucket_sum(std::size_t bucket,
                                                std::span<const float> gradients) override;
  double* update_squared_norm_out() override;
  void after_step(const StepEnd& step) override;
  // Adds results::local_gradient_squared_norm and global_gradient_squared_norm, NaN where not
  // read; on one rank both absent, with the reason.
  void stop(int completed, RankMeasurements& measured) override;

 private:
  // After the warm-up every rank reads at the same stride: from the mean over the ranks of the
  // share of the last warm-up step that the norms took.
  void choose_stride(double norm_seconds, double step_seconds);

  kernels::Device& device_;
  comm::GradientCommunicator& communicator_;
  const int warmup_iterations_;
  const bool update_sees_every_gradient_;
  bool sums_ = false;      // two or more ranks: gradients at two batch sizes
  bool measures_ = false;  // and the update sees the whole summed gradient
  int stride_ = 1;
  // [0] the summed gradient's squared norm (the mean over ranks, from the update's pass), [1 + b]
  // this rank's own in bucket b, read before its sum.
  kernels::DeviceArray<double> squared_norms_;
  // Around each bucket's norm: once it was read, the bucket's sum may write over it.
  std::vector<std::unique_ptr<kernels::DeviceEvent>> norm_start_, norm_end_;
  std::vector<double> global_squared_norm_, local_squared_norm_;  // per iteration
};

}  // namespace dlscale::worker
