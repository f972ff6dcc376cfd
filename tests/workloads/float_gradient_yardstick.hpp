// What a float device's first-step gradients are held to, layer by layer: the network run on
// exact image kernels (each output the float nearest its double-precision value,
// tests/kernels/exact_image_kernels.hpp), and how far that run moves when every input value is
// moved by one float ulp (twice, directions drawn from two seeds). The move is rounding's own
// scale, so it measures the network's conditioning in float: alexnet-r's gradients move by 1e-7
// of a layer's largest, resnet-56's at batch 4 by up to 1.6e-2 (the residual blocks and their
// batch norms amplify it; docs/gpu.md). A float device is right where it is within a few such
// moves of the exact run; a wrong kernel is far beyond them.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tests/kernels/cpu_device_with_image_kernels.hpp"
#include "tests/kernels/exact_image_kernels.hpp"
#include "tests/workloads/first_gradients.hpp"

namespace dlscale::testing {

// The CPU device with the exact image kernels.
class ExactImageKernelsCpu final : public CpuDeviceWithImageKernels {
 public:
  std::unique_ptr<kernels::ConvolutionKernel> make_convolution(
      const kernels::ConvolutionGeometry& geometry) override {
    return std::make_unique<ExactConvolution>(geometry);
  }
  std::unique_ptr<kernels::PoolingKernel> make_pooling(
      const kernels::PoolingGeometry& geometry) override {
    return std::make_unique<ExactPooling>(geometry);
  }
  std::unique_ptr<kernels::BatchNormKernel> make_batch_norm(
      const kernels::BatchNormGeometry& geometry) override {
    return std::make_unique<ExactBatchNorm>(geometry);
  }
};

// Per layer with parameters: the largest |exact - other| over its gradients, as a share of the
// exact run's largest gradient in that layer. Layers without parameters are left out.
inline std::vector<double> relative_layer_differences(const FirstGradients& exact,
                                                      const FirstGradients& other) {
  std::vector<double> shares;
  std::size_t offset = 0;
  for (const auto& layer : exact.layers) {
    if (layer.count == 0) continue;
    double difference = 0, largest = 0;
    for (std::size_t j = offset; j < offset + layer.count; ++j) {
      largest = std::max(largest, std::abs(double(exact.values[j])));
      difference = std::max(difference, std::abs(double(exact.values[j]) - other.values[j]));
    }
    shares.push_back(difference / std::max(largest, 1e-30));
    offset += layer.count;
  }
  return shares;
}

struct FloatGradientYardstick {
  FirstGradients exact;
  std::vector<double> ulp_spread;  // per layer with parameters: the larger of the two moves
  double largest_spread = 0;
};

// Made once per model and batch in a test program (the exact kernels take tens of seconds for
// resnet-56), then shared by every test that asks.
inline const FloatGradientYardstick& float_gradient_yardstick(const std::string& model, int batch) {
  static std::map<std::pair<std::string, int>, FloatGradientYardstick> made;
  if (const auto found = made.find({model, batch}); found != made.end()) return found->second;
  ExactImageKernelsCpu device;
  FloatGradientYardstick yardstick{first_gradients(device, model, batch), {}, 0};
  const auto once =
      relative_layer_differences(yardstick.exact, first_gradients(device, model, batch, 11));
  const auto twice =
      relative_layer_differences(yardstick.exact, first_gradients(device, model, batch, 12));
  for (std::size_t l = 0; l < once.size(); ++l) {
    yardstick.ulp_spread.push_back(std::max(once[l], twice[l]));
    yardstick.largest_spread = std::max(yardstick.largest_spread, yardstick.ulp_spread.back());
  }
  return made.emplace(std::pair{model, batch}, std::move(yardstick)).first->second;
}

// Rounding's own bounds, as multiples of the ulp moves: a device's difference from the exact run
// is at most this many of the layer's spread plus a floor of a few float ulps, or, where the
// network amplifies rounding (a spread above `ill_conditioned`), this many of its largest
// spread: at that conditioning where in the network a difference lands is itself rounding.
constexpr double spreads_allowed = 4;
constexpr double ulps_floor = 1e-6;
constexpr double ill_conditioned = 1e-3;

// Empty when `device_name`'s gradients are within rounding of the exact run, layer by layer;
// otherwise one line per layer that is not, last layer first. Also the table, for the log.
inline std::string beyond_rounding(const FloatGradientYardstick& yardstick,
                                   const FirstGradients& on_device, const std::string& device_name,
                                   std::string& table) {
  const auto differences = relative_layer_differences(yardstick.exact, on_device);
  const bool amplifies = yardstick.largest_spread > ill_conditioned;
  table += fmt::format(
      "layer  ulp spread  {} (largest difference from the exact run, as a share "
      "of the layer's largest gradient)\n",
      device_name);
  std::vector<std::string> reports;
  for (std::size_t l = 0; l < differences.size(); ++l) {
    table += fmt::format("{:5}  {:10.2e}  {:10.2e}\n", l, yardstick.ulp_spread[l], differences[l]);
    const double allowed = amplifies ? spreads_allowed * yardstick.largest_spread
                                     : spreads_allowed * yardstick.ulp_spread[l] + ulps_floor;
    if (!(differences[l] <= allowed))
      reports.push_back(
          fmt::format("layer {} with parameters: {} differs from the exact run by "
                      "{:.3g} of its largest gradient, beyond rounding's {:.3g}",
                      l, device_name, differences[l], allowed));
  }
  std::string text;
  for (auto report = reports.rbegin(); report != reports.rend(); ++report) text += "\n  " + *report;
  return text;
}

}  // namespace dlscale::testing
