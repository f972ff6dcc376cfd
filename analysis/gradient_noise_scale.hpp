// The gradient noise scale B_noise = tr(Sigma) / |G|^2 of McCandlish et al. (2018, "An Empirical
// Model of Large-Batch Training", appendix A), from what data-parallel training has for free:
// every rank's gradient of its own batch (B_small samples) before the sum, and the summed
// gradient of the global batch (B_big = ranks x B_small) after it. B_noise predicts the critical
// batch size: a batch much below it trains almost as well per sample as the smallest, one much
// above it wastes most of its samples.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dlscale::analysis {

// One iteration's squared gradient norms: the mean over the ranks of each rank's |G_small|^2
// (the gradient of its own batch, averaged over its samples), and |G_big|^2 of the global batch's
// mean gradient.
struct GradientNormSample {
  double local_squared_norm = 0;
  double global_squared_norm = 0;
};

struct NoiseScaleEstimate {
  // Both means over the iterations of their unbiased per-iteration estimates.
  double gradient_squared_norm = 0;  // |G|^2, of the true gradient
  double trace_covariance = 0;       // tr(Sigma), of one sample's gradient
  double noise_scale = 0;            // B_noise = tr(Sigma) / |G|^2, in samples
  // Its 95% bootstrap interval over the iterations; an end is NaN where it is unbounded (more
  // than 2.5% of the resamples have a mean |G|^2 that is not positive).
  double noise_scale_low = 0, noise_scale_high = 0;
  int iterations = 0;
};

// The per-iteration unbiased estimates (appendix A.1), from E|G_B|^2 = |G|^2 + tr(Sigma) / B:
//   |G|^2     = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
//   tr(Sigma) = (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)
// Each is noisy, and |G|^2 can come out negative in a single iteration, so B_noise is the ratio of
// their means over the iterations, as the paper smooths them separately before dividing, and its
// interval resamples the iterations in pairs. Nothing where B_big is not larger than B_small (one
// rank: there is one batch size only), where there are no samples, or where the mean |G|^2 is not
// positive (the noise hides the gradient altogether); `why_not` then says which.
std::optional<NoiseScaleEstimate> estimate_noise_scale(
    const std::vector<GradientNormSample>& samples, double small_batch, double big_batch,
    std::string* why_not = nullptr);

// What a sample of a global batch of `batch` is worth beside one of `baseline_batch`, after
// McCandlish et al.: training to a given loss takes E(B) = E_min (1 + B / B_noise) samples, so
// E(baseline_batch) / E(batch) = (B_noise + baseline_batch) / (B_noise + batch). Pollux's
// statistical efficiency; goodput is throughput times it.
double statistical_efficiency(double noise_scale, double baseline_batch, double batch);

}  // namespace dlscale::analysis
