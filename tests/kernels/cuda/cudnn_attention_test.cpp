// The CUDA device's fused attention (DLSCALE_CUDNN_ATTENTION=sdpa, cuDNN's scaled-dot-product
// attention under --precision bf16): forward and backward against a double-precision causal
// attention computed here from its definition (model/causal_self_attention_layer.hpp), within
// bf16's 1% relative L2; the GPT layer handing its work to it; a captured step replaying its
// eager results bit for bit; and the setting itself. Built wherever CUDA and the cuDNN frontend
// are found, run only on machines with a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/bf16_sum.hpp"
#include "core/errors.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/device_array.hpp"
#include "model/causal_self_attention_layer.hpp"
#include "tests/kernels/finite_differences.hpp"
#include "tests/kernels/relative_error.hpp"
#include "tests/kernels/scoped_setting.hpp"

namespace dlscale::kernels {
namespace {

constexpr double bf16_relative_l2 = 0.01;  // as the bf16 GEMMs and convolutions are held

void require_gpu() { ASSERT_GT(visible_gpu_count(), 0) << "the attention tests need a GPU"; }

// A CUDA device made with DLSCALE_CUDNN_ATTENTION set to `setting` (unset if null, whatever the
// environment says); the variable is restored however the constructor ends.
std::unique_ptr<CudaDevice> device_with(const char* setting, Precision precision) {
  const dlscale::testing::ScopedSetting attention("DLSCALE_CUDNN_ATTENTION", setting);
  return std::make_unique<CudaDevice>(0, precision);
}

// Values a bf16 holds exactly, so the reference and the GPU start from the same inputs.
std::vector<float> bf16_values(std::size_t count, std::uint64_t stream, double scale) {
  std::vector<float> values(count);
  const auto normal = dlscale::testing::random_values(count, stream);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = comm::from_bf16(comm::to_bf16(float(normal[i] * scale)));
  return values;
}

// Causal attention in double, by its definition: x [batch x steps x 3 width] (Q, K, V of a step
// side by side), y [batch x steps x width]; dx from dy by the backward of the layer's header.
struct ReferenceAttention {
  int batch, steps, width, heads;

  int d() const { return width / heads; }
  double q(const std::vector<float>& x, int b, int i, int h, int c) const {
    return x[(std::size_t(b) * steps + i) * 3 * width + std::size_t(h) * d() + c];
  }
  std::size_t at(int b, int i, int part, int h, int c) const {  // into x or dx
    return (std::size_t(b) * steps + i) * 3 * width + std::size_t(part) * width +
           std::size_t(h) * d() + c;
  }
  // P of one sample and head: row i over keys 0..i.
  std::vector<double> probabilities(const std::vector<float>& x, int b, int h) const {
    const double scale = 1 / std::sqrt(double(d()));
    std::vector<double> p(std::size_t(steps) * steps, 0.0);
    for (int i = 0; i < steps; ++i) {
      double largest = -INFINITY;
      for (int j = 0; j <= i; ++j) {
        double s = 0;
        for (int c = 0; c < d(); ++c) s += double(x[at(b, i, 0, h, c)]) * x[at(b, j, 1, h, c)];
        p[std::size_t(i) * steps + j] = s * scale;
        largest = std::max(largest, s * scale);
      }
      double sum = 0;
      for (int j = 0; j <= i; ++j) sum += std::exp(p[std::size_t(i) * steps + j] - largest);
      for (int j = 0; j <= i; ++j)
        p[std::size_t(i) * steps + j] = std::exp(p[std::size_t(i) * steps + j] - largest) / sum;
    }
    return p;
  }
  std::vector<float> forward(const std::vector<float>& x) const {
    std::vector<float> y(std::size_t(batch) * steps * width);
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < heads; ++h) {
        const auto p = probabilities(x, b, h);
        for (int i = 0; i < steps; ++i)
          for (int c = 0; c < d(); ++c) {
            double o = 0;
            for (int j = 0; j <= i; ++j) o += p[std::size_t(i) * steps + j] * x[at(b, j, 2, h, c)];
            y[(std::size_t(b) * steps + i) * width + std::size_t(h) * d() + c] = float(o);
          }
      }
    return y;
  }
  std::vector<float> backward(const std::vector<float>& x, const std::vector<float>& dy) const {
    const double scale = 1 / std::sqrt(double(d()));
    std::vector<double> dx(x.size(), 0.0);
    const auto d_out = [&](int b, int i, int h, int c) {
      return double(dy[(std::size_t(b) * steps + i) * width + std::size_t(h) * d() + c]);
    };
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < heads; ++h) {
        const auto p = probabilities(x, b, h);
        for (int i = 0; i < steps; ++i) {
          std::vector<double> dp(std::size_t(i) + 1);
          double weighted = 0;
          for (int j = 0; j <= i; ++j) {
            double value = 0;
            for (int c = 0; c < d(); ++c) value += d_out(b, i, h, c) * x[at(b, j, 2, h, c)];
            dp[j] = value;
            weighted += p[std::size_t(i) * steps + j] * value;
          }
          for (int j = 0; j <= i; ++j) {
            const double pij = p[std::size_t(i) * steps + j];
            const double ds = pij * (dp[j] - weighted) * scale;
            for (int c = 0; c < d(); ++c) {
              dx[at(b, j, 2, h, c)] += pij * d_out(b, i, h, c);    // dV
              dx[at(b, i, 0, h, c)] += ds * x[at(b, j, 1, h, c)];  // dQ
              dx[at(b, j, 1, h, c)] += ds * x[at(b, i, 0, h, c)];  // dK
            }
          }
        }
      }
    return {dx.begin(), dx.end()};
  }
};

struct Shape {
  int batch, steps, width, heads;
};

// Forward and backward of the fused kernel against the reference, for head widths of 32, 64 and
// 128 and sequences that are and are not multiples of cuDNN's tiles.
TEST(CudnnAttention, FusedAttentionAgreesWithTheDefinition) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  auto device = device_with("sdpa", Precision::bf16);
  for (const Shape& s :
       {Shape{2, 64, 128, 2}, Shape{3, 100, 96, 3}, Shape{1, 256, 768, 12}, Shape{2, 50, 256, 2}}) {
    const std::string what = "batch " + std::to_string(s.batch) + ", " + std::to_string(s.steps) +
                             " steps, width " + std::to_string(s.width) + ", " +
                             std::to_string(s.heads) + " heads";
    const ReferenceAttention reference{s.batch, s.steps, s.width, s.heads};
    const auto x = bf16_values(std::size_t(s.batch) * s.steps * 3 * s.width, 1, 1.0);
    const auto dy = bf16_values(std::size_t(s.batch) * s.steps * s.width, 2, 1.0);
    auto kernel = device->make_attention({s.steps, s.width, s.heads});
    ASSERT_NE(kernel, nullptr) << what;
    DeviceArray<float> device_x(*device, x.size()), y(*device, dy.size()),
        device_dy(*device, dy.size()), dx(*device, x.size());
    device_x.copy_from_host(x);
    device_dy.copy_from_host(dy);
    kernel->forward(s.batch, device_x.data(), y.data());
    kernel->backward(s.batch, device_x.data(), device_dy.data(), dx.data());
    device->synchronize();
    EXPECT_LE(relative_l2(reference.forward(x), y.to_host()), bf16_relative_l2) << what << ": y";
    EXPECT_LE(relative_l2(reference.backward(x, dy), dx.to_host()), bf16_relative_l2)
        << what << ": dx";
  }
}

// The GPT layer runs on the fused kernel where the device has one, and gets what the kernel
// gives; its composed path (the default setting) agrees with the fused one within bf16.
TEST(CudnnAttention, TheLayerHandsItsWorkToTheFusedKernel) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const Shape s{2, 128, 256, 4};
  const auto x = bf16_values(std::size_t(s.batch) * s.steps * 3 * s.width, 3, 1.0);
  const auto dy = bf16_values(std::size_t(s.batch) * s.steps * s.width, 4, 1.0);
  const auto run_layer = [&](CudaDevice& device) {
    model::CausalSelfAttentionLayer<float> layer(device, s.steps, s.width, s.heads);
    DeviceArray<float> device_x(device, x.size()), y(device, dy.size()),
        device_dy(device, dy.size()), dx(device, x.size());
    device_x.copy_from_host(x);
    device_dy.copy_from_host(dy);
    layer.forward(device.math_float(), s.batch, device_x.data(), y.data());
    layer.backward(device.math_float(), s.batch, device_x.data(), y.data(), device_dy.data(),
                   dx.data());
    device.synchronize();
    return std::pair{y.to_host(), dx.to_host()};
  };
  auto fused = device_with("sdpa", Precision::bf16);
  auto composed = device_with("gemm", Precision::bf16);
  const auto [fused_y, fused_dx] = run_layer(*fused);
  const auto [composed_y, composed_dx] = run_layer(*composed);
  // The same kernel again: what the layer handed over came back unchanged.
  auto kernel = fused->make_attention({s.steps, s.width, s.heads});
  DeviceArray<float> device_x(*fused, x.size()), y(*fused, dy.size());
  device_x.copy_from_host(x);
  kernel->forward(s.batch, device_x.data(), y.data());
  fused->synchronize();
  EXPECT_EQ(y.to_host(), fused_y) << "the layer's output is not the fused kernel's";
  EXPECT_LE(relative_l2(composed_y, fused_y), 2 * bf16_relative_l2);
  EXPECT_LE(relative_l2(composed_dx, fused_dx), 2 * bf16_relative_l2);
}

// A captured forward and backward replays the eager results bit for bit (the deterministic
// backward), after its buffers were overwritten.
TEST(CudnnAttention, CapturedStepReplaysTheEagerResults) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  auto device = device_with("sdpa", Precision::bf16);
  const Shape s{4, 192, 384, 6};
  const auto x = bf16_values(std::size_t(s.batch) * s.steps * 3 * s.width, 5, 1.0);
  const auto dy = bf16_values(std::size_t(s.batch) * s.steps * s.width, 6, 1.0);
  auto kernel = device->make_attention({s.steps, s.width, s.heads});
  DeviceArray<float> device_x(*device, x.size()), y(*device, dy.size()),
      device_dy(*device, dy.size()), dx(*device, x.size());
  device_x.copy_from_host(x);
  device_dy.copy_from_host(dy);
  const auto step = [&] {
    kernel->forward(s.batch, device_x.data(), y.data());
    kernel->backward(s.batch, device_x.data(), device_dy.data(), dx.data());
  };
  step();
  device->synchronize();
  const auto eager_y = y.to_host(), eager_dx = dx.to_host();
  const std::unique_ptr<CapturedWork> captured = device->capture(step);
  ASSERT_NE(captured, nullptr);
  y.copy_from_host(std::vector<float>(dy.size(), NAN));
  dx.copy_from_host(std::vector<float>(x.size(), NAN));
  captured->replay();
  device->synchronize();
  const auto replayed_y = y.to_host(), replayed_dx = dx.to_host();
  EXPECT_EQ(0, std::memcmp(replayed_y.data(), eager_y.data(), eager_y.size() * sizeof(float)))
      << "forward";
  EXPECT_EQ(0, std::memcmp(replayed_dx.data(), eager_dx.data(), eager_dx.size() * sizeof(float)))
      << "backward";
}

// Only bf16 runs fused (cuDNN's attention reads bf16 or fp16 tensors), by default; gemm keeps the
// composed attention; by default a head width cuDNN may not run keeps it too (and the attention
// property says so), while asked-for sdpa refuses one it cannot read, and a wrong setting, in one
// UserError.
TEST(CudnnAttention, TheSettingChoosesAndRefusesPlainly) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  // changed_settings below names the attention alone.
  const dlscale::testing::DefaultGpuSettings defaults;
  EXPECT_NE(device_with(nullptr, Precision::bf16)->make_attention({64, 128, 2}), nullptr);
  EXPECT_EQ(device_with("gemm", Precision::bf16)->make_attention({64, 128, 2}), nullptr);
  EXPECT_EQ(device_with("sdpa", Precision::fp32)->make_attention({64, 128, 2}), nullptr);
  EXPECT_EQ(device_with(nullptr, Precision::tf32)->make_attention({64, 128, 2}), nullptr);
  EXPECT_NE(device_with("sdpa", Precision::bf16)->make_attention({64, 128, 2}), nullptr);
  const auto property = [](CudaDevice& device, const char* name) {
    for (const auto& [property_name, value] : device.properties())
      if (property_name == name) return value;
    return std::string("(none)");
  };
  EXPECT_EQ(property(*device_with(nullptr, Precision::bf16), "attention"), "sdpa");
  EXPECT_EQ(property(*device_with("sdpa", Precision::fp32), "attention"), "gemm");
  EXPECT_EQ(property(*device_with("gemm", Precision::bf16), "changed_settings"), "attention gemm");
  const auto unreadable = device_with(nullptr, Precision::bf16);
  EXPECT_EQ(unreadable->make_attention({64, 60, 3}), nullptr) << "a head width of 20, by default";
  EXPECT_EQ(device_with(nullptr, Precision::bf16)->make_attention({64, 512, 2}), nullptr)
      << "a head width of 256, by default (not every GPU's cuDNN runs its backward)";
  EXPECT_EQ(property(*unreadable, "attention"), "gemm");
  try {
    device_with("flash", Precision::bf16);
    ADD_FAILURE() << "DLSCALE_CUDNN_ATTENTION=flash was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("DLSCALE_CUDNN_ATTENTION"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(device_with("sdpa", Precision::bf16)->make_attention({64, 60, 3}), UserError)
      << "a head width of 20";
}

}  // namespace
}  // namespace dlscale::kernels
