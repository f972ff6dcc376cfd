// The noise scale's norms: read on the device inside the step, copied to the host after it, and
// kept as two per-iteration series.
#include "worker/instruments/gradient_noise_meter.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "worker/training_loop.hpp"

namespace dlscale::worker {

namespace {

// The share of a step that the norms may take on average: they are read every k-th step, k chosen
// after the warm-up from what they took there (fcn-s at batch 64: one read is 5.3% of a step).
constexpr double noise_scale_budget = 0.004;

results::Measurement gradient_norm_series(const char* name, const char* description,
                                          std::vector<double> values, bool measured,
                                          const char* absent_reason) {
  results::Measurement series;
  series.name = name;
  series.units = "1";
  series.description = description;
  series.shape = results::MeasurementShape::per_iteration;
  if (measured)
    series.values = std::move(values);
  else
    series.absent_reason = absent_reason;
  return series;
}

}  // namespace

GradientNoiseMeter::GradientNoiseMeter(kernels::Device& device,
                                       comm::GradientCommunicator& communicator,
                                       int warmup_iterations, bool update_sees_every_gradient)
    : device_(device),
      communicator_(communicator),
      warmup_iterations_(warmup_iterations),
      update_sees_every_gradient_(update_sees_every_gradient) {}

void GradientNoiseMeter::start(std::size_t summed_buckets) {
  sums_ = summed_buckets > 0;
  measures_ = sums_ && update_sees_every_gradient_;
  squared_norms_ = kernels::DeviceArray<double>(device_, summed_buckets + 1);
  for (std::size_t b = 0; b < summed_buckets; ++b) {
    norm_start_.push_back(device_.make_event());
    norm_end_.push_back(device_.make_event());
  }
}

bool GradientNoiseMeter::reads_at(int iteration) const {
  return measures_ && (iteration < std::max(1, warmup_iterations_) || iteration % stride_ == 0);
}

const kernels::DeviceEvent* GradientNoiseMeter::before_bucket_sum(
    std::size_t bucket, std::span<const float> gradients) {
  device_.record(*norm_start_[bucket]);
  device_.math<float>().squared_norm(gradients.size(), gradients.data(),
                                     squared_norms_.data() + 1 + bucket);
  device_.record(*norm_end_[bucket]);
  return norm_end_[bucket].get();
}

double* GradientNoiseMeter::update_squared_norm_out() { return squared_norms_.data(); }

void GradientNoiseMeter::after_step(const StepEnd& step) {
  if (!measures_) return;
  if (!step.instrument_read) {
    global_squared_norm_.push_back(std::nan(""));
    local_squared_norm_.push_back(std::nan(""));
    return;
  }
  const std::vector<double> norms = squared_norms_.to_host();
  global_squared_norm_.push_back(norms[0]);
  double local = 0, norm_seconds = 0;
  for (std::size_t b = 0; b < norm_start_.size(); ++b) {
    local += norms[1 + b];
    norm_seconds += device_.elapsed_seconds(*norm_start_[b], *norm_end_[b]);
  }
  local_squared_norm_.push_back(local);
  if (step.iteration == std::max(1, warmup_iterations_) - 1)
    choose_stride(norm_seconds, step.step_seconds);
}

void GradientNoiseMeter::choose_stride(double norm_seconds, double step_seconds) {
  kernels::DeviceArray<float> share(device_, 1);
  share.copy_from_host(std::vector<float>{float(norm_seconds / step_seconds)});
  communicator_.allreduce_sum(share.span());
  const double mean_share = double(share.to_host().front()) / communicator_.size();
  stride_ = int(std::clamp(std::ceil(mean_share / noise_scale_budget), 1.0, 1e6));
}

// One value per step that ran (after_step), so a run stopped early keeps the steps it made.
void GradientNoiseMeter::stop(int /*completed*/, RankMeasurements& measured) {
  const char* absent_reason =
      !sums_
          ? "one rank: the gradient noise scale needs gradients at two batch sizes, a rank's own "
            "and the sum over two or more ranks"
          : "--sharding: each rank's update sees only its shard of the summed gradient, so the "
            "norm of the global batch's gradient is not read";
  measured.series.push_back(gradient_norm_series(
      results::local_gradient_squared_norm,
      "squared L2 norm of this rank's own gradient (its mean loss over its batch), before the "
      "sum over ranks",
      std::move(local_squared_norm_), measures_, absent_reason));
  measured.series.push_back(gradient_norm_series(
      results::global_gradient_squared_norm,
      "squared L2 norm of the gradient averaged over all ranks (the global batch), as the "
      "update applied it",
      std::move(global_squared_norm_), measures_, absent_reason));
}

}  // namespace dlscale::worker
