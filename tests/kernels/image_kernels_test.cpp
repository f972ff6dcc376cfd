// Convolution, pooling and batch norm: the double-precision reference oracles against finite
// differences, then the CPU device's oneDNN kernels (float) against the oracles, forward and
// backward, over strides, padding, groups (depthwise included), both pooling kinds, and the
// plain and native activation layouts (the oracles' NCHW is reordered in and out).
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <tuple>

#include "kernels/cpu/cpu_device.hpp"
#include "tests/kernels/finite_differences.hpp"
#include "tests/kernels/reference_image_kernels.hpp"

namespace dlscale::kernels {
namespace {

using namespace dlscale::testing;

constexpr int batch = 2;
constexpr double float_tolerance = 2e-5;

std::vector<float> to_float(const std::vector<double>& values) {
  return {values.begin(), values.end()};
}
std::vector<double> to_double(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

// A batch of images (as many as the values hold) moved between layouts by a oneDNN reorder.
std::vector<float> relayout(const CpuDevice& device, const ImageShape& shape, ImageLayout from,
                            ImageLayout to, std::vector<float> values) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::vector<float> result(values.size());
  const int images = int(values.size() / shape.size());
  dnnl::memory source(device.image_layouts().describe(images, shape, from), engine, values.data());
  dnnl::memory target(device.image_layouts().describe(images, shape, to), engine, result.data());
  dnnl::reorder(source, target).execute(stream, source, target);
  stream.wait();
  return result;
}
std::vector<float> to_layout(const CpuDevice& device, const ImageShape& shape, ImageLayout layout,
                             const std::vector<double>& nchw) {
  return relayout(device, shape, ImageLayout::nchw, layout, to_float(nchw));
}
std::vector<double> from_layout(const CpuDevice& device, const ImageShape& shape,
                                ImageLayout layout, const std::vector<float>& values) {
  return to_double(relayout(device, shape, layout, ImageLayout::nchw, values));
}

constexpr auto nchw = ImageLayout::nchw;
constexpr auto native = ImageLayout::native;

const std::vector<ConvolutionGeometry> convolution_cases = {
    {{3, 6, 5}, 4, 3, 1, 1, 1},         // same-size 3x3
    {{4, 7, 7}, 6, 3, 2, 1, 1},         // stride 2
    {{2, 5, 5}, 3, 5, 1, 2, 1},         // 5x5 with padding 2
    {{4, 6, 6}, 6, 3, 1, 1, 2},         // 2 groups
    {{6, 5, 5}, 6, 3, 2, 1, 6},         // depthwise, stride 2
    {{3, 9, 9}, 4, 1, 1, 0, 1},         // 1x1
    {{4, 6, 6}, 8, 1, 2, 0, 1, false},  // 1x1 stride 2 without bias, as before batch norm
    // As in the networks: the plain input into the native layout, then native to native.
    {{3, 9, 9}, 8, 3, 1, 1, 1, true, nchw, native},
    {{8, 6, 6}, 16, 3, 2, 1, 1, false, native, native},
    {{16, 5, 5}, 16, 3, 1, 1, 16, false, native, native},  // depthwise
    {{16, 4, 4}, 8, 1, 1, 0, 1, true, native, nchw},
    // With the ReLU fused (VGG's and AlexNet's convolutions), with and without bias.
    {{3, 9, 9}, 8, 3, 1, 1, 1, true, nchw, native, true},
    {{8, 6, 6}, 8, 3, 2, 1, 1, false, native, native, true},
    {{4, 5, 5}, 6, 3, 1, 1, 1, true, nchw, nchw, true}};

// resnet-56's own shapes, where oneDNN may pick other implementations than for tiny ones: held
// to the oracle only (finite differences over 40,000 values would take minutes).
const std::vector<ConvolutionGeometry> network_sized_convolutions = {
    {{64, 8, 8}, 64, 3, 1, 1, 1, false, native, native},
    {{16, 32, 32}, 32, 3, 2, 1, 1, false, native, native},
    {{16, 32, 32}, 32, 1, 2, 0, 1, false, native, native}};

const std::vector<PoolingGeometry> pooling_cases = {
    {{3, 6, 6}, PoolingKind::max, 2, 2, 0},
    {{2, 7, 7}, PoolingKind::max, 3, 2, 0},
    {{2, 7, 7}, PoolingKind::max, 3, 2, 1},
    {{3, 6, 6}, PoolingKind::average, 2, 2, 0},
    {{2, 7, 7}, PoolingKind::average, 3, 2, 1},
    {{4, 5, 5}, PoolingKind::average, 5, 1, 0},  // global average
    {{8, 7, 7}, PoolingKind::max, 3, 2, 1, native, native},
    {{16, 4, 4}, PoolingKind::average, 4, 1, 0, native, native},
    // Into a dense layer: native in, plain out (resnet-56's last pooling, and a max pool).
    {{64, 8, 8}, PoolingKind::average, 8, 1, 0, native, nchw},
    {{16, 7, 7}, PoolingKind::max, 3, 2, 0, native, nchw}};

class ConvolutionCase : public ::testing::TestWithParam<ConvolutionGeometry> {};
class NetworkSizedConvolution : public ::testing::TestWithParam<ConvolutionGeometry> {};
class PoolingCase : public ::testing::TestWithParam<PoolingGeometry> {};

TEST_P(ConvolutionCase, ReferenceMatchesFiniteDifferences) {
  const ConvolutionGeometry g = GetParam();
  std::vector<double> x = random_values(batch * g.input.size(), 1);
  std::vector<double> weights = random_values(g.weight_count(), 2);
  std::vector<double> bias = random_values(g.bias ? g.output_channels : 0, 3);
  const std::vector<double> output_weights = random_values(batch * g.output().size(), 4);
  const auto loss = [&] {
    return dot(reference::convolution_forward(g, batch, x, weights, bias), output_weights);
  };
  // The backward takes the gradient before the ReLU: output_weights where the output is positive.
  std::vector<double> before_relu = output_weights;
  if (g.relu) {
    const auto y = reference::convolution_forward(g, batch, x, weights, bias);
    std::size_t clipped = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
      if (!(y[i] > 0)) before_relu[i] = 0, ++clipped;
    ASSERT_GT(clipped, 0u) << "the ReLU must clip something";
    ASSERT_LT(clipped, y.size()) << "the ReLU must pass something";
  }
  const auto grads = reference::convolution_backward(g, batch, x, weights, before_relu);
  expect_gradients_match(grads.input, numerical_gradient(x, loss), "input gradient");
  expect_gradients_match(grads.weights, numerical_gradient(weights, loss), "weight gradient");
  expect_gradients_match(grads.bias, numerical_gradient(bias, loss), "bias gradient");
}

// One forward and backward of `kernel` (made by `device` for g) at `batch`, against the reference.
void expect_onednn_convolution_matches_reference(const ConvolutionGeometry& g, CpuDevice& device,
                                                 ConvolutionKernel& kernel, int batch) {
  // Inputs rounded to float first, so both sides compute on the same values.
  const auto x = to_double(to_float(random_values(batch * g.input.size(), 1)));
  const auto weights = to_double(to_float(random_values(g.weight_count(), 2)));
  const auto bias = to_double(to_float(random_values(g.bias ? g.output_channels : 0, 3)));
  const auto dy = to_double(to_float(random_values(batch * g.output().size(), 4)));

  const auto x_given = to_layout(device, g.input, g.input_layout, x);
  const auto dy_given = to_layout(device, g.output(), g.output_layout, dy);
  std::vector<float> y(dy.size()), dx(x.size()), dweights(weights.size()), dbias(bias.size());
  kernel.forward(batch, x_given.data(), to_float(weights).data(), to_float(bias).data(), y.data());
  kernel.backward(batch, x_given.data(), to_float(weights).data(), y.data(), dy_given.data(),
                  dx.data(), dweights.data(), dbias.data());

  // With a fused ReLU the kernel masks dy where its own y is 0; so does the reference.
  const std::vector<double> y_plain = from_layout(device, g.output(), g.output_layout, y);
  const auto expected = reference::convolution_backward(
      g, batch, x, weights, g.relu ? reference::relu_masked(dy, y_plain) : dy);
  if (g.relu) {
    const auto clipped =
        std::count_if(y_plain.begin(), y_plain.end(), [](double v) { return !(v > 0); });
    ASSERT_GT(clipped, 0) << "the ReLU must clip something, or its mask is not tested";
  }
  expect_near_all(y_plain, reference::convolution_forward(g, batch, x, weights, bias),
                  float_tolerance, "output");
  expect_near_all(from_layout(device, g.input, g.input_layout, dx), expected.input, float_tolerance,
                  "input gradient");
  expect_near_all(to_double(dweights), expected.weights, float_tolerance, "weight gradient");
  expect_near_all(to_double(dbias), expected.bias, float_tolerance, "bias gradient");
}

void expect_onednn_convolution_matches_reference(const ConvolutionGeometry& g) {
  CpuDevice device(1);
  expect_onednn_convolution_matches_reference(g, device, *device.make_convolution(g), batch);
}

// A kernel keeps one masked-gradient buffer for a fused ReLU, grown to the largest batch so far:
// a smaller batch after a larger one, and a larger one after that, still match the reference.
TEST(ConvolutionKernel, OneKernelMasksAFusedReluAtEveryBatchSize) {
  const ConvolutionGeometry g{{8, 6, 6}, 8, 3, 1, 1, 1, true, native, native, true};
  CpuDevice device(1);
  const auto kernel = device.make_convolution(g);
  for (const int batch_size : {3, 1, 5, 2}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch_size);
    expect_onednn_convolution_matches_reference(g, device, *kernel, batch_size);
  }
}

TEST_P(ConvolutionCase, OneDnnMatchesReference) {
  expect_onednn_convolution_matches_reference(GetParam());
}

TEST_P(NetworkSizedConvolution, OneDnnMatchesReference) {
  expect_onednn_convolution_matches_reference(GetParam());
}

TEST_P(PoolingCase, ReferenceMatchesFiniteDifferences) {
  const PoolingGeometry g = GetParam();
  std::vector<double> x = random_values(batch * g.input.size(), 5);
  const std::vector<double> output_weights = random_values(batch * g.output().size(), 6);
  const auto loss = [&] { return dot(reference::pooling_forward(g, batch, x), output_weights); };
  expect_gradients_match(reference::pooling_backward(g, batch, x, output_weights),
                         numerical_gradient(x, loss), "input gradient");
}

TEST_P(PoolingCase, OneDnnMatchesReference) {
  const PoolingGeometry g = GetParam();
  const auto x = to_double(to_float(random_values(batch * g.input.size(), 5)));
  const auto dy = to_double(to_float(random_values(batch * g.output().size(), 6)));
  CpuDevice device(1);
  auto kernel = device.make_pooling(g);
  std::vector<float> y(dy.size()), dx(x.size());
  kernel->forward(batch, to_layout(device, g.input, g.input_layout, x).data(), y.data());
  kernel->backward(batch, to_layout(device, g.output(), g.output_layout, dy).data(), dx.data());
  expect_near_all(from_layout(device, g.output(), g.output_layout, y),
                  reference::pooling_forward(g, batch, x), float_tolerance, "output");
  expect_near_all(from_layout(device, g.input, g.input_layout, dx),
                  reference::pooling_backward(g, batch, x, dy), float_tolerance, "input gradient");
}

TEST(BatchNorm, ReferenceMatchesFiniteDifferences) {
  const ImageShape shape{3, 4, 5};
  std::vector<double> x = random_values(batch * shape.size(), 7);
  std::vector<double> scale = random_values(shape.channels, 8);
  std::vector<double> shift = random_values(shape.channels, 9);
  const std::vector<double> output_weights = random_values(x.size(), 10);
  const auto loss = [&] {
    return dot(reference::batch_norm(shape, batch, x, scale, shift, output_weights).output,
               output_weights);
  };
  const auto analytic = reference::batch_norm(shape, batch, x, scale, shift, output_weights);
  // The normalisation divides by a standard deviation, so allow a little more rounding.
  expect_near_all(analytic.input_gradient, numerical_gradient(x, loss), 1e-6, "input gradient");
  expect_near_all(analytic.scale_gradient, numerical_gradient(scale, loss), 1e-6, "scale gradient");
  expect_near_all(analytic.shift_gradient, numerical_gradient(shift, loss), 1e-6, "shift gradient");
}

class BatchNormCase : public ::testing::TestWithParam<std::tuple<ImageShape, ImageLayout, bool>> {};

// Batch norm, alone or with its ReLU fused, against the oracle (followed by a ReLU, whose
// gradient passes only where the output is positive).
TEST_P(BatchNormCase, OneDnnMatchesReference) {
  const auto [shape, layout, relu] = GetParam();
  const auto x = to_double(to_float(random_values(batch * shape.size(), 7)));
  const auto scale = to_double(to_float(random_values(shape.channels, 8)));
  const auto shift = to_double(to_float(random_values(shape.channels, 9)));
  const auto dy = to_double(to_float(random_values(x.size(), 10)));
  CpuDevice device(1);
  auto kernel = device.make_batch_norm({shape, layout, relu});
  const auto x_given = to_layout(device, shape, layout, x);
  std::vector<float> y(x.size()), dx(x.size()), dscale(shape.channels), dshift(shape.channels);
  kernel->forward(batch, x_given.data(), to_float(scale).data(), to_float(shift).data(), y.data());
  kernel->backward(batch, x_given.data(), to_float(scale).data(), to_float(shift).data(),
                   to_layout(device, shape, layout, dy).data(), dx.data(), dscale.data(),
                   dshift.data());

  std::vector<double> normalized = reference::batch_norm(shape, batch, x, scale, shift, dy).output;
  std::vector<double> passed_gradient = dy;
  std::size_t clipped = 0;
  if (relu)
    for (std::size_t i = 0; i < normalized.size(); ++i)
      if (normalized[i] <= 0) {
        normalized[i] = 0;
        passed_gradient[i] = 0;
        ++clipped;
      }
  if (relu) EXPECT_GT(clipped, normalized.size() / 4) << "the ReLU must clip something";
  const auto expected = reference::batch_norm(shape, batch, x, scale, shift, passed_gradient);
  expect_near_all(from_layout(device, shape, layout, y), normalized, 1e-4, "output");
  expect_near_all(from_layout(device, shape, layout, dx), expected.input_gradient, 1e-4,
                  "input gradient");
  expect_near_all(to_double(dscale), expected.scale_gradient, 1e-4, "scale gradient");
  expect_near_all(to_double(dshift), expected.shift_gradient, 1e-4, "shift gradient");
}

INSTANTIATE_TEST_SUITE_P(Geometries, ConvolutionCase, ::testing::ValuesIn(convolution_cases));
INSTANTIATE_TEST_SUITE_P(Resnet56, NetworkSizedConvolution,
                         ::testing::ValuesIn(network_sized_convolutions));
INSTANTIATE_TEST_SUITE_P(Geometries, PoolingCase, ::testing::ValuesIn(pooling_cases));
INSTANTIATE_TEST_SUITE_P(LayoutsAndRelu, BatchNormCase,
                         ::testing::Combine(::testing::Values(ImageShape{8, 5, 5},
                                                              ImageShape{64, 8, 8}),
                                            ::testing::Values(nchw, native), ::testing::Bool()));

// Blocked layouts are used only where the channels fill whole blocks, so a buffer never carries
// padding and every layer can size its tensors as channels x height x width.
TEST(ImageLayouts, NativeNeverPadsAndDiffersFromPlainWhereItBlocks) {
  CpuDevice device(1);
  const auto& layouts = device.image_layouts();
  for (int channels : {1, 3, 5, 8, 12, 16, 24, 64, 96, 1280}) {
    const ImageShape shape{channels, 7, 7};
    EXPECT_EQ(layouts.describe(batch, shape, native).get_size(),
              batch * shape.size() * sizeof(float))
        << channels << " channels";
  }
  const ImageShape wide{64, 7, 7};
  EXPECT_EQ(layouts.describe(batch, wide, native) == layouts.describe(batch, wide, nchw),
            layouts.native_name() == "nchw")
      << "native is " << layouts.native_name();
}

}  // namespace
}  // namespace dlscale::kernels
