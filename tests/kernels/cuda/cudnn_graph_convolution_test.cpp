// The CUDA device's graph-API path (DLSCALE_CUDNN_API=graph): convolutions on cuDNN's graph API in
// NHWC, forward and both backward passes, against the double-precision reference of
// tests/kernels/reference_image_kernels.hpp, in fp32 (tight), tf32 and bf16 (1% relative L2); in
// every combination of NCHW and native (NHWC) input and output; pooling and batch norm in the
// native NHWC layout; a captured step replaying its eager results; and the setting itself.
// Built wherever CUDA and the cuDNN frontend are found, run only on machines with a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/bf16_sum.hpp"
#include "core/errors.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/cudnn_graph_convolution.hpp"
#include "kernels/cuda/image_layout_conversion.hpp"
#include "kernels/device_array.hpp"
#include "tests/kernels/finite_differences.hpp"
#include "tests/kernels/reference_image_kernels.hpp"
#include "tests/kernels/relative_error.hpp"
#include "tests/kernels/scoped_setting.hpp"

namespace dlscale::kernels {
namespace {

constexpr auto nchw = ImageLayout::nchw;
constexpr auto native = ImageLayout::native;

// fp32 (no tensor cores) against the double reference: |gpu - reference| <= tolerance * (1 + max
// |reference|) over a tensor, as cudnn_kernels_test.cpp holds the legacy path to the CPU.
constexpr double fp32_tolerance = 1e-4;
constexpr double pooling_tolerance = 1e-5;
constexpr double batch_norm_tolerance = 1e-4;
// tf32 products keep 10 mantissa bits, bf16 operands 8: relative L2 error against the double
// reference, the bound the legacy path's bf16 convolutions are held to.
constexpr double reduced_precision_relative_l2 = 0.01;

std::vector<double> random_doubles(std::size_t count, std::uint64_t stream, double scale = 1) {
  std::vector<double> values = dlscale::testing::random_values(count, stream);
  for (double& value : values) value = double(float(value * scale));  // exactly representable
  return values;
}

std::vector<float> as_floats(const std::vector<double>& values) {
  return {values.begin(), values.end()};
}

// NCHW <-> NHWC on the host, for tensors the device holds in its native (NHWC) layout.
std::vector<double> nchw_to_nhwc(const std::vector<double>& from, int batch,
                                 const ImageShape& shape) {
  std::vector<double> to(from.size());
  const std::size_t pixels = std::size_t(shape.height) * shape.width;
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < shape.channels; ++c)
      for (std::size_t p = 0; p < pixels; ++p)
        to[(n * pixels + p) * shape.channels + c] =
            from[(std::size_t(n) * shape.channels + c) * pixels + p];
  return to;
}
std::vector<double> nhwc_to_nchw(const std::vector<double>& from, int batch,
                                 const ImageShape& shape) {
  std::vector<double> to(from.size());
  const std::size_t pixels = std::size_t(shape.height) * shape.width;
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < shape.channels; ++c)
      for (std::size_t p = 0; p < pixels; ++p)
        to[(std::size_t(n) * shape.channels + c) * pixels + p] =
            from[(n * pixels + p) * shape.channels + c];
  return to;
}

// A tensor as the device holds it (NHWC where the layout is native, and there in bf16 on a device
// that keeps bf16 images: rounded, packed into the first half of the float buffer's bytes), from
// and to plain NCHW.
std::vector<float> to_device_layout(const std::vector<double>& values, ImageLayout layout,
                                    int batch, const ImageShape& shape, bool bf16_images = false) {
  std::vector<float> floats =
      as_floats(layout == native ? nchw_to_nhwc(values, batch, shape) : values);
  if (layout != native || !bf16_images) return floats;
  std::vector<std::uint16_t> rounded(floats.size());
  comm::round_to_bf16(floats, rounded);
  std::vector<float> packed(floats.size(), 0.0f);
  std::memcpy(packed.data(), rounded.data(), rounded.size() * sizeof(std::uint16_t));
  return packed;
}
std::vector<double> from_device_layout(const std::vector<float>& values, ImageLayout layout,
                                       int batch, const ImageShape& shape,
                                       bool bf16_images = false) {
  std::vector<double> as_doubles(values.begin(), values.end());
  if (layout == native && bf16_images) {
    std::vector<std::uint16_t> packed(values.size());
    std::memcpy(packed.data(), values.data(), packed.size() * sizeof(std::uint16_t));
    std::vector<float> widened(values.size());
    comm::widen_from_bf16(packed, widened);
    as_doubles.assign(widened.begin(), widened.end());
  }
  return layout == native ? nhwc_to_nchw(as_doubles, batch, shape) : as_doubles;
}

// The values rounded to bf16 (and widened back) where `round` is true.
std::vector<double> maybe_bf16(std::vector<double> values, bool round) {
  if (round)
    for (double& value : values) value = comm::from_bf16(comm::to_bf16(float(value)));
  return values;
}

// A graph-path bf16 device that keeps images in bf16 (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16), or
// one that keeps them in float.
CudaDevice graph_device(Precision precision, bool bf16_images) {
  const dlscale::testing::ScopedSetting images("DLSCALE_CUDA_IMAGE_ACTIVATIONS",
                                               bf16_images ? "bf16" : "float");
  return CudaDevice(0, precision, CudnnApi::graph);
}

struct Comparison {
  std::string name;
  std::vector<double> actual, expected;
};

void expect_within(const Comparison& c, Precision precision, double fp32_bound) {
  ASSERT_EQ(c.actual.size(), c.expected.size()) << c.name;
  if (precision != Precision::fp32) {
    const double error = relative_l2(as_floats(c.expected), as_floats(c.actual));
    EXPECT_LE(error, reduced_precision_relative_l2) << c.name;
    return;
  }
  double largest = 0;
  for (double value : c.expected) largest = std::max(largest, std::abs(value));
  const double bound = fp32_bound * (1 + largest);
  for (std::size_t i = 0; i < c.actual.size(); ++i)
    if (!(std::abs(c.actual[i] - c.expected[i]) <= bound)) {  // NaN fails too
      ADD_FAILURE() << c.name << " differs at index " << i << " of " << c.actual.size()
                    << std::setprecision(9) << ": " << c.actual[i] << " where " << c.expected[i]
                    << " was expected (allowed difference " << bound << ")";
      return;
    }
}

// Every test but the setting's needs a GPU; without one it fails there, plainly (each test asserts
// it with ASSERT_NO_FATAL_FAILURE, so that it stops).
void require_gpu() { ASSERT_GT(visible_gpu_count(), 0) << "the graph-path tests need a GPU"; }

// One convolution on a graph-path device: seeded inputs in NCHW (doubles exactly representable
// in float), the device's outputs brought back to NCHW.
class GraphConvolutionRun {
 public:
  GraphConvolutionRun(CudaDevice& device, const ConvolutionGeometry& g, int batch,
                      bool with_input_gradient = true)
      : device_(device),
        geometry_(g),
        batch_(batch),
        with_input_gradient_(with_input_gradient),
        bf16_images_(device.context().native_is_bf16()),
        kernel_(device.make_convolution(g)),
        x_(random_doubles(std::size_t(batch) * g.input.size(), 1)),
        weights_(random_doubles(
            g.weight_count(), 2,
            1 / std::sqrt(double(g.input.channels / g.groups) * g.kernel * g.kernel))),
        bias_(random_doubles(g.bias ? std::size_t(g.output_channels) : 0, 3)),
        dy_(random_doubles(std::size_t(batch) * g.output().size(), 4)),
        x_device_(device, x_.size()),
        weights_device_(device, weights_.size()),
        bias_device_(device, std::max<std::size_t>(bias_.size(), 1)),
        dy_device_(device, dy_.size()),
        y_device_(device, dy_.size()),
        dx_device_(device, x_.size()),
        dw_device_(device, weights_.size()),
        db_device_(device, std::max<std::size_t>(bias_.size(), 1)) {
    x_device_.copy_from_host(to_device_layout(x_, g.input_layout, batch, g.input, bf16_images_));
    weights_device_.copy_from_host(as_floats(weights_));
    if (g.bias) bias_device_.copy_from_host(as_floats(bias_));
    dy_device_.copy_from_host(
        to_device_layout(dy_, g.output_layout, batch, g.output(), bf16_images_));
  }

  // NaN in every output, so that a comparison fails unless the kernel writes all of it again:
  // bits 0x7FC07FC0 are a NaN as a float and as each of the two bf16 values of bf16 images.
  void poison() {
    const std::uint32_t bits = 0x7FC07FC0u;
    float nan = 0;
    std::memcpy(&nan, &bits, sizeof nan);
    for (DeviceArray<float>* out : {&y_device_, &dx_device_, &dw_device_, &db_device_})
      out->copy_from_host(std::vector<float>(out->size(), nan));
  }
  void forward() {
    kernel_->forward(batch_, x_device_.data(), weights_device_.data(),
                     geometry_.bias ? bias_device_.data() : nullptr, y_device_.data());
  }
  void backward() {
    kernel_->backward(batch_, x_device_.data(), weights_device_.data(), y_device_.data(),
                      dy_device_.data(), with_input_gradient_ ? dx_device_.data() : nullptr,
                      dw_device_.data(), geometry_.bias ? db_device_.data() : nullptr);
  }
  void run() {
    poison();
    forward();
    backward();
  }

  // The device's outputs (NCHW) beside the reference's.
  std::vector<Comparison> against_reference() const {
    const auto& g = geometry_;
    const std::vector<double> y = reference::convolution_forward(g, batch_, x_, weights_, bias_);
    // A fused ReLU's gradient is masked where the kernel's own y is 0: so is the reference's dy.
    const std::vector<double> device_y =
        from_device_layout(y_device_.to_host(), g.output_layout, batch_, g.output(), bf16_images_);
    const reference::ConvolutionGradients grads = reference::convolution_backward(
        g, batch_, x_, weights_, g.relu ? reference::relu_masked(dy_, device_y) : dy_);
    std::vector<Comparison> result;
    result.push_back({"output", device_y, y});
    if (with_input_gradient_)
      result.push_back(
          {"input gradient",
           from_device_layout(dx_device_.to_host(), g.input_layout, batch_, g.input, bf16_images_),
           grads.input});
    result.push_back(
        {"weight gradient", from_device_layout(dw_device_.to_host(), nchw, 0, {}), grads.weights});
    if (g.bias) {
      const std::vector<float> db = db_device_.to_host();
      result.push_back({"bias gradient", {db.begin(), db.end()}, grads.bias});
    }
    return result;
  }

  // Every output as it lies on the device, for bit-for-bit comparisons.
  std::vector<std::vector<float>> raw_outputs() const {
    return {y_device_.to_host(), dx_device_.to_host(), dw_device_.to_host(), db_device_.to_host()};
  }

 private:
  CudaDevice& device_;
  ConvolutionGeometry geometry_;
  int batch_;
  bool with_input_gradient_;
  bool bf16_images_;  // native x, y and their gradients are bf16 on the device
  std::unique_ptr<ConvolutionKernel> kernel_;
  std::vector<double> x_, weights_, bias_, dy_;
  DeviceArray<float> x_device_, weights_device_, bias_device_, dy_device_;
  DeviceArray<float> y_device_, dx_device_, dw_device_, db_device_;
};

// ------------------------------------------------------------------------------------------------
// Convolutions against the reference

struct ConvolutionCase {
  const char* name;
  ConvolutionGeometry geometry;
  int batch = 3;
};
void PrintTo(const ConvolutionCase& c, std::ostream* out) { *out << c.name; }

// The cases tests/kernels/cuda/cudnn_kernels_test.cpp gives the legacy path, and the layouts a
// network hands the graph path: the NCHW data in, native out (a first layer); native in, NCHW out
// (the layer before a dense one); native both ways (every other layer).
const ConvolutionCase convolution_cases[] = {
    {"same_3x3", {{3, 9, 9}, 8, 3, 1, 1, 1}},
    {"stride_2_5x5", {{4, 11, 11}, 6, 5, 2, 2, 1}},
    {"pointwise_without_bias", {{8, 7, 7}, 16, 1, 1, 0, 1, false}},
    {"pointwise_stride_2_without_bias", {{8, 8, 8}, 16, 1, 2, 0, 1, false}},
    {"grouped", {{8, 6, 6}, 12, 3, 1, 1, 4}},
    {"depthwise_stride_2", {{16, 7, 7}, 16, 3, 2, 1, 16, false}},
    {"depthwise", {{32, 9, 9}, 32, 3, 1, 1, 32}},
    {"alexnet_11x11_stride_4", {{3, 35, 35}, 16, 11, 4, 2, 1}},
    {"wide_3x3", {{64, 14, 14}, 64, 3, 1, 1, 1, false}, 8},
    {"native_layouts", {{8, 6, 6}, 16, 3, 2, 1, 1, false, native, native}},
    {"first_layer_nchw_in_native_out", {{3, 16, 16}, 16, 3, 1, 1, 1, true, nchw, native}, 4},
    {"last_layer_native_in_nchw_out", {{16, 8, 8}, 32, 3, 1, 1, 1, true, native, nchw}, 4},
    {"native_with_bias", {{32, 8, 8}, 64, 3, 1, 1, 1, true, native, native}, 8},
    {"native_pointwise_to_one_pixel", {{16, 1, 1}, 32, 1, 1, 0, 1, true, native, nchw}, 4},
    // The ReLU fused into the convolution (VGG's, AlexNet's): in cuDNN's graph where an engine
    // runs it, else with the bias by dlscale's kernel; into NHWC and into NCHW, without bias.
    {"relu_first_layer", {{3, 16, 16}, 16, 3, 1, 1, 1, true, nchw, native, true}, 4},
    {"relu_native_with_bias", {{32, 8, 8}, 64, 3, 1, 1, 1, true, native, native, true}, 8},
    {"relu_last_layer_to_nchw", {{16, 8, 8}, 32, 3, 1, 1, 1, true, native, nchw, true}, 4},
    {"relu_without_bias", {{8, 6, 6}, 16, 3, 2, 1, 1, false, native, native, true}},
    // mobilenet-v2's and alexnet's shapes between native images (on bf16 images only engines
    // that write bf16 may run them).
    {"grouped_native", {{8, 6, 6}, 12, 3, 1, 1, 4, true, native, native}},
    {"depthwise_native", {{32, 9, 9}, 32, 3, 1, 1, 32, false, native, native}},
    {"depthwise_stride_2_native", {{16, 7, 7}, 16, 3, 2, 1, 16, false, native, native}},
    {"native_11x11_stride_4", {{16, 35, 35}, 16, 11, 4, 2, 1, true, native, native, true}},
    // A ResNet's projection shortcut: its input gradient is zero at the pixels the stride skips.
    {"pointwise_stride_2_native", {{16, 32, 32}, 32, 1, 2, 0, 1, false, native, native}, 4},
};

struct PrecisionCase {
  ConvolutionCase convolution;
  Precision precision;
};
void PrintTo(const PrecisionCase& c, std::ostream* out) {
  *out << c.convolution.name << " " << precision_name(c.precision);
}

std::vector<PrecisionCase> every_precision() {
  std::vector<PrecisionCase> cases;
  for (Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16})
    for (const ConvolutionCase& c : convolution_cases) cases.push_back({c, precision});
  return cases;
}

class GraphConvolutionAgainstReference : public ::testing::TestWithParam<PrecisionCase> {};

TEST_P(GraphConvolutionAgainstReference, ForwardAndBothBackwardPassesMatch) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const PrecisionCase& c = GetParam();
  CudaDevice device = graph_device(c.precision, false);  // bf16 images: the suite below
  GraphConvolutionRun run(device, c.convolution.geometry, c.convolution.batch);
  run.run();
  for (const Comparison& comparison : run.against_reference()) {
    expect_within(comparison, c.precision, fp32_tolerance);
    // Under bf16 the operands are rounded: equal to float's would mean bf16 never ran. (The bias
    // gradient sums the float output gradient.)
    if (c.precision == Precision::bf16 && comparison.name != "bias gradient")
      EXPECT_GT(relative_l2(as_floats(comparison.expected), as_floats(comparison.actual)), 1e-5)
          << comparison.name << ": equal to float's; did bf16 run?";
  }
}

INSTANTIATE_TEST_SUITE_P(GraphPath, GraphConvolutionAgainstReference,
                         ::testing::ValuesIn(every_precision()),
                         [](const ::testing::TestParamInfo<PrecisionCase>& test) {
                           return std::string(test.param.convolution.name) + "_" +
                                  precision_name(test.param.precision);
                         });

// The same cases on bf16 images (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16): native x and dy are read,
// and native y and dx written, as bf16 where they lie; held to the reference as bf16 operands
// are (the outputs' own rounding is 0.4% at most, within the 1% bound).
class GraphConvolutionOnBf16Images : public ::testing::TestWithParam<ConvolutionCase> {};

TEST_P(GraphConvolutionOnBf16Images, ForwardAndBothBackwardPassesMatch) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  CudaDevice device = graph_device(Precision::bf16, true);
  ASSERT_TRUE(device.context().native_is_bf16());
  GraphConvolutionRun run(device, GetParam().geometry, GetParam().batch);
  run.run();
  for (const Comparison& comparison : run.against_reference())
    expect_within(comparison, Precision::bf16, fp32_tolerance);
}

INSTANTIATE_TEST_SUITE_P(GraphPath, GraphConvolutionOnBf16Images,
                         ::testing::ValuesIn(convolution_cases),
                         [](const ::testing::TestParamInfo<ConvolutionCase>& test) {
                           return std::string(test.param.name);
                         });

// A network's first layer gets no input gradient: the other gradients must still be right.
TEST(GraphPath, FirstLayerWithoutInputGradientMatchesTheReference) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  CudaDevice device(0, Precision::fp32, CudnnApi::graph);
  GraphConvolutionRun run(device, {{3, 9, 9}, 8, 3, 2, 1, 1, true, nchw, native}, 2, false);
  run.run();
  for (const Comparison& comparison : run.against_reference())
    expect_within(comparison, Precision::fp32, fp32_tolerance);
}

// Layers of the same shape share their engine choice; a second layer must still write its own
// outputs from its own inputs.
TEST(GraphPath, LayersOfTheSameShapeEachComputeTheirOwn) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  CudaDevice device(0, Precision::fp32, CudnnApi::graph);
  const ConvolutionGeometry g{{16, 8, 8}, 16, 3, 1, 1, 1, true, native, native};
  GraphConvolutionRun first(device, g, 4), second(device, g, 4);
  first.run();
  second.run();
  for (const Comparison& comparison : second.against_reference())
    expect_within(comparison, Precision::fp32, fp32_tolerance);
  // The same shape with a fused ReLU, and without again: a forward choice made with the ReLU
  // must not run a layer without it, nor the other way round.
  ConvolutionGeometry with_relu = g;
  with_relu.relu = true;
  GraphConvolutionRun rectified(device, with_relu, 4), plain(device, g, 4);
  rectified.run();
  plain.run();
  for (const Comparison& comparison : rectified.against_reference())
    expect_within(comparison, Precision::fp32, fp32_tolerance);
  for (const Comparison& comparison : plain.against_reference())
    expect_within(comparison, Precision::fp32, fp32_tolerance);
}

// ------------------------------------------------------------------------------------------------
// Pooling and batch norm in the native (NHWC) layout of the graph path

struct PoolingCase {
  const char* name;
  PoolingGeometry geometry;
};
void PrintTo(const PoolingCase& c, std::ostream* out) { *out << c.name; }

const PoolingCase pooling_cases[] = {
    {"max_3x3_stride_2_padding_1", {{8, 14, 14}, PoolingKind::max, 3, 2, 1, native, native}},
    {"max_2x2", {{16, 8, 8}, PoolingKind::max, 2, 2, 0, native, native}},
    {"max_3x3_stride_2_64_channels", {{64, 13, 13}, PoolingKind::max, 3, 2, 0, native, native}},
    {"global_average_to_nchw", {{32, 7, 7}, PoolingKind::average, 7, 1, 0, native, nchw}},
    // Before a dense layer (vgg-16, alexnet): NHWC in, NCHW out, re-laid after pooling.
    {"max_2x2_to_nchw", {{16, 8, 8}, PoolingKind::max, 2, 2, 0, native, nchw}},
    {"average_3x3_stride_2_padding_1", {{8, 7, 7}, PoolingKind::average, 3, 2, 1, native, native}},
};

class GraphPathPooling : public ::testing::TestWithParam<PoolingCase> {};

// On float images, and on bf16 images (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16: native x, y and
// their gradients bf16, held as bf16 tensors are; an NCHW output stays float).
TEST_P(GraphPathPooling, MatchesTheReferenceInNhwc) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const PoolingGeometry& g = GetParam().geometry;
  const int batch = 3;
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 images" : "float images");
    const Precision precision = bf16 ? Precision::bf16 : Precision::fp32;
    CudaDevice device = graph_device(precision, bf16);
    const std::unique_ptr<PoolingKernel> kernel = device.make_pooling(g);
    // On bf16 images the device holds x and dy rounded: so does the reference, or rounding that
    // ties two values of a max window would send the gradient to a different input.
    const std::vector<double> x =
        maybe_bf16(random_doubles(std::size_t(batch) * g.input.size(), 5), bf16);
    const std::vector<double> dy =
        maybe_bf16(random_doubles(std::size_t(batch) * g.output().size(), 6), bf16);
    DeviceArray<float> x_device(device, x.size()), dy_device(device, dy.size()),
        y_device(device, dy.size()), dx_device(device, x.size());
    x_device.copy_from_host(to_device_layout(x, g.input_layout, batch, g.input, bf16));
    dy_device.copy_from_host(to_device_layout(dy, g.output_layout, batch, g.output(), bf16));
    kernel->forward(batch, x_device.data(), y_device.data());
    kernel->backward(batch, dy_device.data(), dx_device.data());
    expect_within(
        {"output", from_device_layout(y_device.to_host(), g.output_layout, batch, g.output(), bf16),
         reference::pooling_forward(g, batch, x)},
        precision, pooling_tolerance);
    expect_within({"input gradient",
                   from_device_layout(dx_device.to_host(), g.input_layout, batch, g.input, bf16),
                   reference::pooling_backward(g, batch, x, dy)},
                  precision, pooling_tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(GraphPath, GraphPathPooling, ::testing::ValuesIn(pooling_cases),
                         [](const ::testing::TestParamInfo<PoolingCase>& test) {
                           return std::string(test.param.name);
                         });

// NHWC batch norm runs on dlscale's own kernels (channel_kernels.cu): with and without the
// fused ReLU, with many slabs of rows and a channel count that is no multiple of 32, and as a
// network's first layer (no input gradient).
struct BatchNormCase {
  const char* name;
  ImageShape shape;
  int batch;
  bool relu;
  bool input_gradient;
};

class GraphPathBatchNorm : public ::testing::TestWithParam<BatchNormCase> {};

void check_batch_norm(const BatchNormCase& c, bool bf16);

// On float images, and on bf16 images (x, y and their gradients bf16; statistics, scale and shift
// and their gradients float), held as bf16 tensors are.
TEST_P(GraphPathBatchNorm, MatchesTheReferenceInNhwc) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 images" : "float images");
    check_batch_norm(GetParam(), bf16);
  }
}

void check_batch_norm(const BatchNormCase& c, bool bf16) {
  const auto& [name, shape, batch, relu, wants_input_gradient] = c;
  const int channels = shape.channels;
  const Precision precision = bf16 ? Precision::bf16 : Precision::fp32;
  CudaDevice device = graph_device(precision, bf16);
  const std::unique_ptr<BatchNormKernel> kernel = device.make_batch_norm({shape, native, relu});
  const std::size_t count = std::size_t(batch) * shape.size();
  const std::vector<double> x = random_doubles(count, 7), scale = random_doubles(channels, 8),
                            shift = random_doubles(channels, 9), dy = random_doubles(count, 10);
  DeviceArray<float> x_device(device, count), scale_device(device, channels),
      shift_device(device, channels), dy_device(device, count), y_device(device, count),
      dx_device(device, count), dscale_device(device, channels), dshift_device(device, channels);
  x_device.copy_from_host(to_device_layout(x, native, batch, shape, bf16));
  dy_device.copy_from_host(to_device_layout(dy, native, batch, shape, bf16));
  scale_device.copy_from_host(as_floats(scale));
  shift_device.copy_from_host(as_floats(shift));
  kernel->forward(batch, x_device.data(), scale_device.data(), shift_device.data(),
                  y_device.data());
  kernel->backward(batch, x_device.data(), scale_device.data(), shift_device.data(),
                   dy_device.data(), wants_input_gradient ? dx_device.data() : nullptr,
                   dscale_device.data(), dshift_device.data());
  const std::vector<double> y = from_device_layout(y_device.to_host(), native, batch, shape, bf16);
  // The ReLU passes the gradient where the kernel's own output is positive (a value within
  // rounding of 0 may fall either way; the mask is the kernel's, the arithmetic is checked).
  std::vector<double> masked_dy = dy;
  if (relu)
    for (std::size_t i = 0; i < count; ++i)
      if (!(y[i] > 0)) masked_dy[i] = 0;
  const reference::BatchNormResult expected =
      reference::batch_norm(shape, batch, x, scale, shift, masked_dy);
  std::vector<double> expected_output = expected.output;
  if (relu)
    for (double& value : expected_output) value = std::max(value, 0.0);
  const auto host = [](const DeviceArray<float>& array) {
    const std::vector<float> values = array.to_host();
    return std::vector<double>(values.begin(), values.end());
  };
  std::vector<Comparison> comparisons{
      {"output", y, expected_output},
      {"scale gradient", host(dscale_device), expected.scale_gradient},
      {"shift gradient", host(dshift_device), expected.shift_gradient}};
  if (wants_input_gradient)
    comparisons.push_back({"input gradient",
                           from_device_layout(dx_device.to_host(), native, batch, shape, bf16),
                           expected.input_gradient});
  for (const Comparison& comparison : comparisons)
    expect_within(comparison, precision, batch_norm_tolerance);
}

const BatchNormCase batch_norm_cases[] = {
    {"small", {32, 7, 7}, 4, false, true},
    {"relu", {32, 7, 7}, 4, true, true},
    {"many_slabs_48_channels", {48, 28, 28}, 16, true, true},
    {"wide_few_rows", {200, 2, 2}, 3, false, true},
    {"first_layer", {16, 9, 9}, 8, true, false},
};

INSTANTIATE_TEST_SUITE_P(GraphPath, GraphPathBatchNorm, ::testing::ValuesIn(batch_norm_cases),
                         [](const ::testing::TestParamInfo<BatchNormCase>& test) {
                           return std::string(test.param.name);
                         });

std::string device_property(const CudaDevice& device, const char* name);  // below

// A bf16 graph-path device made with `variable` set to `value` is refused with the one line
// `message`.
void expect_graph_device_refused(const char* variable, const char* value,
                                 const std::string& message) {
  const dlscale::testing::ScopedSetting bad(variable, value);
  try {
    const CudaDevice refused(0, Precision::bf16, CudnnApi::graph);
    ADD_FAILURE() << variable << "=" << value << " was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(std::string(error.what()), message);
  }
}

// DLSCALE_CUDA_FAST_DIVMOD=yes: the NHWC pooling and batch norm kernels split their indices by
// FastDivmod (fast_divmod.hpp) instead of integer division. The values are the same, so every
// output and gradient of every pooling and batch norm case above equals the default's bit for
// bit, on float and on bf16 images. On by default; listed in changed_settings where off;
// anything but no or yes one line.
TEST(GraphPath, FastDivmodPoolingAndBatchNormEqualTheDefaultBitForBit) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  constexpr int batch = 3;
  // Each kernel's outputs and gradients, in the cases' order, as the host reads them.
  const auto run_every_case = [&](const char* fast, bool bf16) {
    const dlscale::testing::ScopedSetting setting("DLSCALE_CUDA_FAST_DIVMOD", fast);
    CudaDevice device = graph_device(bf16 ? Precision::bf16 : Precision::fp32, bf16);
    EXPECT_EQ(device.context().fast_divmod, std::string(fast) == "yes");
    std::vector<std::pair<std::string, std::vector<double>>> results;
    for (const PoolingCase& c : pooling_cases) {
      const PoolingGeometry& g = c.geometry;
      const std::unique_ptr<PoolingKernel> kernel = device.make_pooling(g);
      const std::size_t in = batch * g.input.size(), out = batch * g.output().size();
      DeviceArray<float> x(device, in), dy(device, out), y(device, out), dx(device, in);
      x.copy_from_host(
          to_device_layout(random_doubles(in, 5), g.input_layout, batch, g.input, bf16));
      dy.copy_from_host(
          to_device_layout(random_doubles(out, 6), g.output_layout, batch, g.output(), bf16));
      kernel->forward(batch, x.data(), y.data());
      kernel->backward(batch, dy.data(), dx.data());
      results.push_back(
          {std::string(c.name) + " output",
           from_device_layout(y.to_host(), g.output_layout, batch, g.output(), bf16)});
      results.push_back({std::string(c.name) + " input gradient",
                         from_device_layout(dx.to_host(), g.input_layout, batch, g.input, bf16)});
    }
    for (const BatchNormCase& c : batch_norm_cases) {
      const std::unique_ptr<BatchNormKernel> kernel =
          device.make_batch_norm({c.shape, native, c.relu});
      const std::size_t count = std::size_t(c.batch) * c.shape.size();
      const int channels = c.shape.channels;
      DeviceArray<float> x(device, count), dy(device, count), y(device, count), dx(device, count),
          scale(device, channels), shift(device, channels), dscale(device, channels),
          dshift(device, channels);
      x.copy_from_host(to_device_layout(random_doubles(count, 7), native, c.batch, c.shape, bf16));
      dy.copy_from_host(
          to_device_layout(random_doubles(count, 10), native, c.batch, c.shape, bf16));
      scale.copy_from_host(as_floats(random_doubles(channels, 8)));
      shift.copy_from_host(as_floats(random_doubles(channels, 9)));
      kernel->forward(c.batch, x.data(), scale.data(), shift.data(), y.data());
      kernel->backward(c.batch, x.data(), scale.data(), shift.data(), dy.data(), dx.data(),
                       dscale.data(), dshift.data());
      const auto host = [](const DeviceArray<float>& array) {
        const std::vector<float> values = array.to_host();
        return std::vector<double>(values.begin(), values.end());
      };
      results.push_back({std::string(c.name) + " output",
                         from_device_layout(y.to_host(), native, c.batch, c.shape, bf16)});
      results.push_back({std::string(c.name) + " input gradient",
                         from_device_layout(dx.to_host(), native, c.batch, c.shape, bf16)});
      results.push_back({std::string(c.name) + " scale gradient", host(dscale)});
      results.push_back({std::string(c.name) + " shift gradient", host(dshift)});
    }
    return results;
  };
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 images" : "float images");
    const auto wide = run_every_case("no", bf16);
    const auto fast = run_every_case("yes", bf16);
    ASSERT_EQ(fast.size(), wide.size());
    for (std::size_t k = 0; k < wide.size(); ++k) {
      const auto& [name, expected] = wide[k];
      const std::vector<double>& actual = fast[k].second;
      ASSERT_EQ(actual.size(), expected.size()) << name;
      const auto differs = std::mismatch(expected.begin(), expected.end(), actual.begin());
      EXPECT_TRUE(differs.first == expected.end())
          << name << ": index " << (differs.first - expected.begin()) << " is "
          << std::setprecision(9) << *differs.second << " where the default gives "
          << *differs.first;
    }
  }
  {
    const dlscale::testing::ScopedSetting unset("DLSCALE_CUDA_FAST_DIVMOD", nullptr);
    const CudaDevice by_default(0, Precision::bf16, CudnnApi::graph);
    EXPECT_TRUE(by_default.context().fast_divmod);
    const dlscale::testing::ScopedSetting no("DLSCALE_CUDA_FAST_DIVMOD", "no");
    const CudaDevice device(0, Precision::bf16, CudnnApi::graph);
    EXPECT_NE(device_property(device, "changed_settings").find("fast_divmod no"), std::string::npos)
        << device_property(device, "changed_settings");
  }
  expect_graph_device_refused(
      "DLSCALE_CUDA_FAST_DIVMOD", "fast",
      "DLSCALE_CUDA_FAST_DIVMOD: unknown fast divmod 'fast' (available: no, yes)");
}

// ------------------------------------------------------------------------------------------------
// The layout conversions every graph convolution leans on

// NCHW -> NHWC in float and in bf16 (rounded as the CPU's bf16 sums round, bit for bit), and
// back, at sizes that are no multiple of the 32 x 32 tiles; one channel or one pixel, where the
// orders agree, is a plain copy.
TEST(GraphPath, LayoutConversionsMatchTheHostTranspose) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  CudaDevice device(0, Precision::fp32, CudnnApi::graph);
  const cudaStream_t stream = device.context().stream;
  for (const ImageBatchShape shape : {ImageBatchShape{3, 37, 5, 7}, ImageBatchShape{2, 64, 33, 1},
                                      ImageBatchShape{5, 1, 9, 9}, ImageBatchShape{4, 40, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "shape " << shape.batch << "x" << shape.channels << "x"
                                      << shape.height << "x" << shape.width);
    const ImageShape image{shape.channels, shape.height, shape.width};
    const std::vector<double> values = random_doubles(shape.size(), 11);
    const std::vector<float> nchw_values = as_floats(values);
    const std::vector<float> nhwc_values = as_floats(nchw_to_nhwc(values, shape.batch, image));
    DeviceArray<float> nchw_device(device, shape.size()), nhwc_device(device, shape.size()),
        back_device(device, shape.size());
    DeviceArray<std::uint16_t> bf16_device(device, shape.size());
    nchw_device.copy_from_host(nchw_values);
    convert_images(nchw_device.data(), MemoryOrder::nchw, nhwc_device.data(), MemoryOrder::nhwc,
                   shape, stream);
    convert_images(static_cast<const float*>(nhwc_device.data()), MemoryOrder::nhwc,
                   back_device.data(), MemoryOrder::nchw, shape, stream);
    convert_images(nchw_device.data(), MemoryOrder::nchw,
                   reinterpret_cast<__nv_bfloat16*>(bf16_device.data()), MemoryOrder::nhwc, shape,
                   stream);
    EXPECT_EQ(nhwc_device.to_host(), nhwc_values) << "NCHW to NHWC, float";
    EXPECT_EQ(back_device.to_host(), nchw_values) << "NHWC back to NCHW, float";
    std::vector<std::uint16_t> expected_bf16(shape.size());
    comm::round_to_bf16(nhwc_values, expected_bf16);
    EXPECT_EQ(bf16_device.to_host(), expected_bf16) << "NCHW to NHWC, rounded to bf16";
    convert_images(reinterpret_cast<const __nv_bfloat16*>(bf16_device.data()), MemoryOrder::nhwc,
                   back_device.data(), MemoryOrder::nchw, shape, stream);
    std::vector<float> expected_widened(shape.size());
    comm::widen_from_bf16(expected_bf16, expected_widened);
    EXPECT_EQ(back_device.to_host(),
              as_floats(nhwc_to_nchw({expected_widened.begin(), expected_widened.end()},
                                     shape.batch, image)))
        << "bf16 NHWC widened back to NCHW float";
  }
}

// ------------------------------------------------------------------------------------------------
// Capture, and the setting

// After the first, eager call for a batch size (where engines are built, timed and staging and
// workspace grow), forward and backward only queue work, so a captured step replays them. The
// graph path takes deterministic engines wherever one runs, so a replay repeats its eager step
// bit for bit, under fp32 and bf16 alike.
class GraphPathCapture : public ::testing::TestWithParam<Precision> {};

TEST_P(GraphPathCapture, CapturedStepReplaysTheEagerResultsBitForBit) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  // Under bf16 on bf16 images (the default) and on float images.
  const std::vector<bool> image_types =
      GetParam() == Precision::bf16 ? std::vector<bool>{true, false} : std::vector<bool>{false};
  for (const bool bf16_images : image_types) {
    SCOPED_TRACE(bf16_images ? "bf16 images" : "float images");
    CudaDevice device = graph_device(GetParam(), bf16_images);
    std::vector<std::unique_ptr<GraphConvolutionRun>> runs;
    runs.push_back(std::make_unique<GraphConvolutionRun>(
        device, ConvolutionGeometry{{3, 32, 32}, 32, 3, 1, 1, 1, true, nchw, native, true}, 16,
        false));
    runs.push_back(std::make_unique<GraphConvolutionRun>(
        device, ConvolutionGeometry{{32, 28, 28}, 64, 3, 2, 1, 1, false, native, native}, 16));
    runs.push_back(std::make_unique<GraphConvolutionRun>(
        device, ConvolutionGeometry{{64, 14, 14}, 64, 3, 1, 1, 64, false, native, native}, 16));
    runs.push_back(std::make_unique<GraphConvolutionRun>(
        device, ConvolutionGeometry{{64, 14, 14}, 128, 1, 1, 0, 1, true, native, nchw}, 16));
    std::vector<std::vector<std::vector<float>>> eager;
    for (auto& run : runs) {
      run->run();
      eager.push_back(run->raw_outputs());
    }
    const std::unique_ptr<CapturedWork> step = device.capture([&] {
      for (auto& run : runs) {
        run->forward();
        run->backward();
      }
    });
    ASSERT_NE(step, nullptr);
    for (auto& run : runs) run->poison();
    step->replay();
    device.synchronize();
    const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const auto replayed = runs[r]->raw_outputs();
      for (std::size_t t = 0; t < replayed.size(); ++t)
        for (std::size_t i = 0; i < replayed[t].size(); ++i)
          if (std::memcmp(&replayed[t][i], &eager[r][t][i], sizeof(float)) != 0 &&
              !(std::isnan(replayed[t][i]) && std::isnan(eager[r][t][i]))) {  // unwritten slots
            ADD_FAILURE() << "layer " << r << ", " << names[t] << ": replay differs at index " << i
                          << std::setprecision(9) << " (" << replayed[t][i] << " vs "
                          << eager[r][t][i] << ")";
            break;
          }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GraphPath, GraphPathCapture,
                         ::testing::Values(Precision::fp32, Precision::bf16),
                         [](const ::testing::TestParamInfo<Precision>& test) {
                           return std::string(precision_name(test.param));
                         });

TEST(GraphPath, TheRunRecordsWhichCudnnApiRan) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  for (const CudnnApi api : {CudnnApi::legacy, CudnnApi::graph}) {
    const CudaDevice device(0, Precision::fp32, api);
    const DeviceProperties properties = device.properties();
    const auto found = std::find_if(properties.begin(), properties.end(),
                                    [](const auto& p) { return p.first == "cudnn_api"; });
    ASSERT_NE(found, properties.end());
    EXPECT_EQ(found->second, cudnn_api_name(api));
  }
}

// DLSCALE_CUDNN_API: unset or empty is the precision's default (legacy under fp32, graph
// otherwise), "graph" is graph, "legacy" legacy, anything else one line naming the choices.
TEST(GraphPath, TheSettingIsReadFromTheEnvironment) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const char* saved = std::getenv("DLSCALE_CUDNN_API");
  const std::string restore = saved != nullptr ? saved : "";
  unsetenv("DLSCALE_CUDNN_API");
  EXPECT_EQ(cudnn_api_from_environment(), std::nullopt);
  EXPECT_EQ(default_cudnn_api(Precision::bf16), CudnnApi::graph);
  EXPECT_EQ(default_cudnn_api(Precision::fp32), CudnnApi::legacy);
  EXPECT_EQ(default_cudnn_api(Precision::tf32), CudnnApi::graph);
  EXPECT_TRUE(CudaDevice(0, Precision::tf32).context().native_is_nhwc());
  EXPECT_TRUE(CudaDevice(0, Precision::bf16).context().native_is_nhwc());
  EXPECT_FALSE(CudaDevice(0, Precision::fp32).context().native_is_nhwc());
  setenv("DLSCALE_CUDNN_API", "legacy", 1);
  EXPECT_FALSE(CudaDevice(0, Precision::bf16).context().native_is_nhwc());
  setenv("DLSCALE_CUDNN_API", "graph", 1);
  EXPECT_EQ(cudnn_api_from_environment(), CudnnApi::graph);
  setenv("DLSCALE_CUDNN_API", "legacy", 1);
  EXPECT_EQ(cudnn_api_from_environment(), CudnnApi::legacy);
  setenv("DLSCALE_CUDNN_API", "backend", 1);
  try {
    cudnn_api_from_environment();
    ADD_FAILURE() << "DLSCALE_CUDNN_API=backend was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(std::string(error.what()),
              "DLSCALE_CUDNN_API: unknown cuDNN API 'backend' (available: legacy, graph)");
  }
  if (saved != nullptr)
    setenv("DLSCALE_CUDNN_API", restore.c_str(), 1);
  else
    unsetenv("DLSCALE_CUDNN_API");
}

// The device's property `name`, or "absent".
std::string device_property(const CudaDevice& device, const char* name) {
  for (const auto& [key, value] : device.properties())
    if (key == name) return value;
  return "absent";
}

// DLSCALE_CUDA_IMAGE_ACTIVATIONS: bf16 images by default on the graph path under bf16, and only
// there (fp32 and tf32 keep float images: the setting may stay set across a sweep of
// precisions); float where asked for. Recorded as the device property image_activations, and in
// changed_settings where it is not the default (absent where every setting has its default); an
// unknown value is one line naming the choices.
TEST(GraphPath, Bf16ImagesByDefaultUnderBf16OnTheGraphPathOnly) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const auto image_activations = [&](const CudaDevice& device) {
    return device_property(device, "image_activations");
  };
  const dlscale::testing::ScopedSetting default_api("DLSCALE_CUDNN_API", nullptr);
  const dlscale::testing::DefaultGpuSettings defaults;
  {
    const dlscale::testing::ScopedSetting unset("DLSCALE_CUDA_IMAGE_ACTIVATIONS", nullptr);
    const CudaDevice device(0, Precision::bf16);
    EXPECT_TRUE(device.context().native_is_bf16());
    EXPECT_EQ(image_activations(device), "bf16");
    EXPECT_EQ(device_property(device, "changed_settings"), "absent");
    EXPECT_FALSE(CudaDevice(0, Precision::fp32, CudnnApi::graph).context().native_is_bf16());
    EXPECT_FALSE(CudaDevice(0, Precision::tf32, CudnnApi::graph).context().native_is_bf16());
    EXPECT_FALSE(CudaDevice(0, Precision::bf16, CudnnApi::legacy).context().native_is_bf16());
    EXPECT_EQ(device_property(CudaDevice(0, Precision::fp32), "changed_settings"), "absent");
  }
  {
    const dlscale::testing::ScopedSetting float_images("DLSCALE_CUDA_IMAGE_ACTIVATIONS", "float");
    const CudaDevice device(0, Precision::bf16);
    EXPECT_FALSE(device.context().native_is_bf16());
    EXPECT_EQ(image_activations(device), "float");
    EXPECT_EQ(device_property(device, "changed_settings"), "image_activations float");
    EXPECT_EQ(device_property(CudaDevice(0, Precision::fp32), "changed_settings"), "absent")
        << "float images are what fp32 runs anyway";
  }
  const dlscale::testing::ScopedSetting half("DLSCALE_CUDA_IMAGE_ACTIVATIONS", "half");
  try {
    const CudaDevice refused(0, Precision::bf16);
    ADD_FAILURE() << "DLSCALE_CUDA_IMAGE_ACTIVATIONS=half was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(std::string(error.what()),
              "DLSCALE_CUDA_IMAGE_ACTIVATIONS: unknown image activation type 'half' (available: "
              "float, bf16)");
  }
}

// DLSCALE_CUDNN_BUILD_THREADS=8: each pass's candidate engines built eight at a time, on threads
// of their own, in every precision (bf16 on bf16 images, as by default): the passes still match
// the reference, and every variant the searches timed built the same number of engines, and of
// runtime-compiled ones, as on one thread (which engine is fastest may differ between two
// searches by timing alone; what is built may not).
TEST(GraphPath, EnginesBuiltOnThreadsMatchTheReference) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const auto device_building_on = [](const char* threads, Precision precision) {
    const dlscale::testing::ScopedSetting setting("DLSCALE_CUDNN_BUILD_THREADS", threads);
    const dlscale::testing::ScopedSetting images("DLSCALE_CUDA_IMAGE_ACTIVATIONS", "bf16");
    return std::make_unique<CudaDevice>(0, precision, CudnnApi::graph);
  };
  for (const Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16}) {
    SCOPED_TRACE(precision_name(precision));
    const auto one = device_building_on("1", precision);
    const auto eight = device_building_on("8", precision);
    ASSERT_EQ(one->context().engine_build_threads, 1);
    ASSERT_EQ(eight->context().engine_build_threads, 8);
    for (const char* name : {"same_3x3", "relu_native_with_bias", "depthwise_native"}) {
      SCOPED_TRACE(name);
      const auto c = std::find_if(
          std::begin(convolution_cases), std::end(convolution_cases),
          [&](const ConvolutionCase& known) { return std::string(known.name) == name; });
      ASSERT_NE(c, std::end(convolution_cases));
      GraphConvolutionRun on_one(*one, c->geometry, c->batch);
      on_one.run();
      GraphConvolutionRun on_eight(*eight, c->geometry, c->batch);
      on_eight.run();
      for (const Comparison& comparison : on_eight.against_reference())
        expect_within(comparison, precision, fp32_tolerance);
    }
    const auto built_on_one = engines_built_per_search(*one->context().convolution_graphs);
    const auto built_on_eight = engines_built_per_search(*eight->context().convolution_graphs);
    EXPECT_FALSE(built_on_one.empty());
    EXPECT_EQ(built_on_eight, built_on_one);
  }
}

// DLSCALE_CUDNN_BUILD_THREADS: 1 by default (absent from changed_settings); a number from 1 to
// 64, listed in changed_settings on the graph path; anything else one line naming the range.
TEST(GraphPath, BuildThreadsAreOneByDefaultAndABadValueIsOneLine) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const dlscale::testing::ScopedSetting images("DLSCALE_CUDA_IMAGE_ACTIVATIONS", nullptr);
  {
    const dlscale::testing::ScopedSetting unset("DLSCALE_CUDNN_BUILD_THREADS", nullptr);
    const CudaDevice device(0, Precision::bf16, CudnnApi::graph);
    EXPECT_EQ(device.context().engine_build_threads, 1);
    EXPECT_EQ(device_property(device, "changed_settings").find("cudnn_build_threads"),
              std::string::npos);
  }
  {
    const dlscale::testing::ScopedSetting sixteen("DLSCALE_CUDNN_BUILD_THREADS", "16");
    const CudaDevice device(0, Precision::bf16, CudnnApi::graph);
    EXPECT_EQ(device.context().engine_build_threads, 16);
    EXPECT_NE(device_property(device, "changed_settings").find("cudnn_build_threads 16"),
              std::string::npos)
        << device_property(device, "changed_settings");
  }
  for (const char* bad : {"0", "65", "eight", "-1", "4 ", "1000"}) {
    const dlscale::testing::ScopedSetting setting("DLSCALE_CUDNN_BUILD_THREADS", bad);
    try {
      const CudaDevice refused(0, Precision::bf16, CudnnApi::graph);
      ADD_FAILURE() << "DLSCALE_CUDNN_BUILD_THREADS=" << bad << " was accepted";
    } catch (const UserError& error) {
      EXPECT_EQ(std::string(error.what())
                    .rfind(std::string("DLSCALE_CUDNN_BUILD_THREADS: '") + bad +
                               "' is not a number of threads from 1 "
                               "to 64",
                           0),
                0u)
          << error.what();
    }
  }
}

// DLSCALE_CUDNN_PRUNED_SEARCH=yes: the search skips the forward graph fusing the bias alone where
// the one fusing the bias and the ReLU found an engine, and under bf16 the filter gradient
// written in float where the one written in bf16 found an engine (cuda_context.hpp). In tf32 and
// bf16 (bf16 images, as by default), three cases (plain, bias and ReLU fused, depthwise) still
// match the reference; the pruned searches time no variant whose dominating variant found an
// engine, and every other variant the full searches time (under bf16 some are left out). Off by
// default (absent from changed_settings); on, listed in changed_settings on the graph path;
// anything but no or yes one line.
TEST(GraphPath, PrunedSearchSkipsDominatedVariantsAndMatchesTheReference) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const dlscale::testing::ScopedSetting images("DLSCALE_CUDA_IMAGE_ACTIVATIONS", "bf16");
  const dlscale::testing::ScopedSetting one_thread("DLSCALE_CUDNN_BUILD_THREADS", nullptr);
  const dlscale::testing::ScopedSetting no_cache("DLSCALE_CUDNN_KERNEL_CACHE", nullptr);
  {
    const dlscale::testing::ScopedSetting unset("DLSCALE_CUDNN_PRUNED_SEARCH", nullptr);
    const CudaDevice device(0, Precision::bf16, CudnnApi::graph);
    EXPECT_FALSE(device.context().pruned_search);
    EXPECT_EQ(device_property(device, "changed_settings").find("cudnn_pruned_search"),
              std::string::npos);
  }
  // The variant that would stand for `variant` under the setting (the forward graph fusing the
  // bias and the ReLU for one fusing the bias alone after a ReLU; the bf16-writing filter
  // gradient for a float-writing one), or "" where none would.
  const auto replaced = [](std::string variant, const std::string& from, const std::string& to) {
    variant.replace(variant.find(from), from.size(), to);
    return variant;
  };
  const auto dominating = [&](const std::string& variant) -> std::string {
    // The non-deterministic fallback, tried only where no deterministic engine runs, is not
    // pruned.
    if (variant.find("deterministic 0") != std::string::npos) return "";
    const bool forward = variant.rfind("forward ", 0) == 0;
    if (forward && variant.find(" relu1 ") != std::string::npos &&
        variant.find("fuse_bias 1 fuse_relu 0") != std::string::npos)
      return replaced(variant, "fuse_relu 0", "fuse_relu 1");
    if (variant.rfind("backward-filter ", 0) == 0 && variant.find(" bf16") != std::string::npos &&
        variant.find("float_output 1") != std::string::npos)
      return replaced(variant, "float_output 1", "float_output 0");
    return "";
  };
  for (const Precision precision : {Precision::tf32, Precision::bf16}) {
    SCOPED_TRACE(precision_name(precision));
    std::map<std::string, std::map<std::string, std::pair<int, int>>> searched;  // by setting
    std::map<std::string, std::set<std::string>> found;                          // by setting
    for (const char* pruned : {"no", "yes"}) {
      SCOPED_TRACE(std::string("DLSCALE_CUDNN_PRUNED_SEARCH=") + pruned);
      const dlscale::testing::ScopedSetting setting("DLSCALE_CUDNN_PRUNED_SEARCH", pruned);
      CudaDevice device(0, precision, CudnnApi::graph);
      ASSERT_EQ(device.context().pruned_search, std::string(pruned) == "yes");
      if (device.context().pruned_search)
        EXPECT_NE(device_property(device, "changed_settings").find("cudnn_pruned_search yes"),
                  std::string::npos)
            << device_property(device, "changed_settings");
      for (const char* name : {"same_3x3", "relu_native_with_bias", "depthwise_native"}) {
        SCOPED_TRACE(name);
        const auto c = std::find_if(
            std::begin(convolution_cases), std::end(convolution_cases),
            [&](const ConvolutionCase& known) { return std::string(known.name) == name; });
        ASSERT_NE(c, std::end(convolution_cases));
        GraphConvolutionRun run(device, c->geometry, c->batch);
        run.run();
        for (const Comparison& comparison : run.against_reference())
          expect_within(comparison, precision, fp32_tolerance);
      }
      searched[pruned] = engines_built_per_search(*device.context().convolution_graphs);
      found[pruned] = variants_with_an_engine(*device.context().convolution_graphs);
    }
    // The variants a search timed though the variant standing for them had found an engine.
    const auto prunable = [&](const char* pruned) {
      std::vector<std::string> result;
      for (const auto& [variant, built] : searched[pruned])
        if (const std::string by = dominating(variant); !by.empty() && found[pruned].count(by))
          result.push_back(variant);
      return result;
    };
    // Without the setting such variants are timed; with it none is, and every other variant is
    // timed as without it (which variants find an engine does not depend on timing).
    const std::vector<std::string> timed_anyway = prunable("no"), left_out = prunable("yes");
    EXPECT_TRUE(left_out.empty()) << left_out.front() << " was timed though what dominates it "
                                  << "found an engine";
    EXPECT_EQ(searched["yes"].size() + timed_anyway.size(), searched["no"].size());
    // Under bf16 the filter gradients written in bf16 find engines (every bf16 search on the H200
    // did), so the pruned search times fewer variants; under tf32 only a fused bias and ReLU
    // engine, where cuDNN offers one for float tensors, stands for another.
    if (precision == Precision::bf16) EXPECT_FALSE(timed_anyway.empty());
    std::printf("%s: %zu variants searched without the setting, %zu with it\n",
                precision_name(precision), searched["no"].size(), searched["yes"].size());
  }
  expect_graph_device_refused(
      "DLSCALE_CUDNN_PRUNED_SEARCH", "some",
      "DLSCALE_CUDNN_PRUNED_SEARCH: unknown pruned search 'some' (available: no, yes)");
}

// DLSCALE_CUDNN_KERNEL_CACHE=yes: dynamic-shape graphs sharing one kernel cache per topology.
// Seven cases (plain, fused, grouped, depthwise), in every precision (bf16 on bf16 images, as by
// default), still match the reference. The depthwise cases (two at stride 1, as mobilenet-v2's,
// one of them on another shape, and one at stride 2) share their backward passes' topologies,
// so some topology's cache must serve two dynamic-shape graphs that ran. Off by default (absent
// from changed_settings); on, listed in changed_settings on the graph path; anything but no or
// yes one line.
TEST(GraphPath, KernelCacheServesShapesOfOneTopologyAndMatchesTheReference) {
  ASSERT_NO_FATAL_FAILURE(require_gpu());
  const dlscale::testing::ScopedSetting images("DLSCALE_CUDA_IMAGE_ACTIVATIONS", "bf16");
  const dlscale::testing::ScopedSetting one_thread("DLSCALE_CUDNN_BUILD_THREADS", nullptr);
  {
    const dlscale::testing::ScopedSetting unset("DLSCALE_CUDNN_KERNEL_CACHE", nullptr);
    const CudaDevice device(0, Precision::bf16, CudnnApi::graph);
    EXPECT_FALSE(device.context().kernel_cache);
    EXPECT_EQ(device_property(device, "changed_settings").find("cudnn_kernel_cache"),
              std::string::npos);
  }
  const ConvolutionCase wider_depthwise{"depthwise_native_wider",
                                        {{48, 5, 5}, 48, 3, 1, 1, 48, false, native, native}};
  for (const Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16}) {
    SCOPED_TRACE(precision_name(precision));
    const dlscale::testing::ScopedSetting cache("DLSCALE_CUDNN_KERNEL_CACHE", "yes");
    CudaDevice device(0, precision, CudnnApi::graph);
    ASSERT_TRUE(device.context().kernel_cache);
    EXPECT_NE(device_property(device, "changed_settings").find("cudnn_kernel_cache yes"),
              std::string::npos)
        << device_property(device, "changed_settings");
    std::vector<ConvolutionCase> cases;
    for (const ConvolutionCase& c : convolution_cases)
      for (const char* name : {"same_3x3", "relu_native_with_bias", "grouped_native", "depthwise",
                               "depthwise_native", "depthwise_stride_2_native"})
        if (std::string(c.name) == name) cases.push_back(c);
    ASSERT_EQ(cases.size(), 6u);
    cases.push_back(wider_depthwise);
    for (const ConvolutionCase& c : cases) {
      SCOPED_TRACE(c.name);
      GraphConvolutionRun run(device, c.geometry, c.batch);
      run.run();
      for (const Comparison& comparison : run.against_reference())
        expect_within(comparison, precision, fp32_tolerance);
    }
    // Some topology's cache served two or more dynamic-shape graphs that ran (the depthwise
    // passes of different shapes), not only static ones after a dynamic graph found no engine.
    int most_graphs_of_one_topology = 0;
    for (const auto& [topology, graphs] : kernel_cache_use(*device.context().convolution_graphs))
      most_graphs_of_one_topology = std::max(most_graphs_of_one_topology, graphs);
    EXPECT_GE(most_graphs_of_one_topology, 2);
  }
  expect_graph_device_refused(
      "DLSCALE_CUDNN_KERNEL_CACHE", "on",
      "DLSCALE_CUDNN_KERNEL_CACHE: unknown kernel cache 'on' (available: no, yes)");
}

}  // namespace
}  // namespace dlscale::kernels
