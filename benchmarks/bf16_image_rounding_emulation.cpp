// dlscale-bench-bf16-image-emulation: the GPU's bf16 rounding, emulated on the CPU, to ask whether
// rounding alone explains resnet-56's three-step losses with bf16 images. On the H200 run of
// 2026-11-27 (docs/gpu.md) resnet-56 at batch 4 ended its third step lower with bf16 images than
// with float images in three of three runs (0.69, 0.99, 1.01 against 1.26, 1.44, 1.62).
//
// Two emulations of --precision bf16, each a CPU device whose kernels round where the GPU does:
//  - "float images": every convolution's and GEMM's operands rounded to bf16 (the products summed
//    in float, as tensor cores do); everything else float.
//  - "bf16 images": also every image and image gradient in the device's native layout rounded to
//    bf16 where the GPU stores it (convolution, batch norm and pooling outputs and input
//    gradients, a residual block's sum and ReLU and their gradients).
// Not emulated: the order in which cuDNN's engines sum (which engine runs, how it splits its
// reductions). Section (2) stands in for it by noise of one or two float ulps on every
// convolution result; section (3) moves the inputs instead, as the GPU check's spread does.
//
// Prints (1) the three-step losses of fp32 and both emulations at the GPU test's seeds and
// batches (tests/workloads/three_step_spread.hpp); (2) each step's loss over --samples runs with
// that noise; (3) the same over --samples runs with inputs moved by about a bf16 ulp; (4) one
// residual block alone, identity and projection, against fp32 (relative L2).
//   usage: dlscale-bench-bf16-image-emulation [--model resnet-56] [--batch 4] [--samples 41]
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "analysis/statistics.hpp"
#include "core/random.hpp"
#include "kernels/device_array.hpp"
#include "tests/kernels/cpu_device_with_image_kernels.hpp"
#include "tests/kernels/relative_error.hpp"
#include "tests/workloads/three_step_spread.hpp"
#include "workloads/network_plan.hpp"

namespace {

using namespace dlscale;
using kernels::ImageLayout;
namespace po = boost::program_options;

enum class Rounding { fp32, float_images, bf16_images };

const char* name_of(Rounding rounding) {
  return std::array{"fp32", "float images", "bf16 images"}[int(rounding)];
}

// Round to nearest even at bf16's 8 significant bits, as the GPU's float-to-bf16 conversion does.
float to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) return value;  // inf and NaN stay as they are
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&value, &bits, sizeof bits);
  return value;
}

void round_to_bf16(float* values, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) values[i] = to_bf16(values[i]);
}

// Where one emulated run rounds, and its optional engine-like noise. Shared by a device's kernels.
class Emulation {
 public:
  Emulation(Rounding rounding, std::optional<std::uint32_t> noise_seed)
      : rounding_(rounding),
        noise_(noise_seed ? std::optional<std::mt19937>(*noise_seed) : std::nullopt) {}

  // A bf16 copy of an operand in `buffer` (the original where operands stay float).
  const float* operand(std::vector<float>& buffer, const float* values, std::size_t count) const {
    if (rounding_ == Rounding::fp32 || values == nullptr) return values;
    buffer.assign(values, values + count);
    round_to_bf16(buffer.data(), count);
    return buffer.data();
  }
  // Rounds an image that the GPU would store in bf16.
  void store_image(ImageLayout layout, float* values, std::size_t count) const {
    if (rounding_ == Rounding::bf16_images && layout == ImageLayout::native && values != nullptr)
      round_to_bf16(values, count);
  }
  // Each value times 1 +- 2^-22 (one or two float ulps): what another summation order changes.
  void add_engine_noise(float* values, std::size_t count) {
    if (!noise_ || values == nullptr) return;
    for (std::size_t i = 0; i < count; ++i)
      values[i] *= ((*noise_)() & 1) ? 1.0f + 0x1p-22f : 1.0f - 0x1p-22f;
  }

 private:
  Rounding rounding_;
  std::optional<std::mt19937> noise_;
};

class EmulatedConvolution final : public kernels::ConvolutionKernel {
 public:
  EmulatedConvolution(std::unique_ptr<kernels::ConvolutionKernel> cpu,
                      const kernels::ConvolutionGeometry& geometry, Emulation& emulation)
      : cpu_(std::move(cpu)), geometry_(geometry), emulation_(emulation) {}

  void forward(int batch, const float* x, const float* weights, const float* bias,
               float* y) override {
    x = emulation_.operand(x_, x, input_count(batch));
    weights = emulation_.operand(weights_, weights, geometry_.weight_count());
    cpu_->forward(batch, x, weights, bias, y);
    emulation_.add_engine_noise(y, output_count(batch));
    emulation_.store_image(geometry_.output_layout, y, output_count(batch));
  }
  void backward(int batch, const float* x, const float* weights, const float* y, const float* dy,
                float* dx, float* weight_gradient, float* bias_gradient) override {
    x = emulation_.operand(x_, x, input_count(batch));
    weights = emulation_.operand(weights_, weights, geometry_.weight_count());
    dy = emulation_.operand(dy_, dy, output_count(batch));
    cpu_->backward(batch, x, weights, y, dy, dx, weight_gradient, bias_gradient);
    emulation_.add_engine_noise(dx, input_count(batch));
    emulation_.add_engine_noise(weight_gradient, geometry_.weight_count());
    emulation_.store_image(geometry_.input_layout, dx, input_count(batch));
  }

 private:
  std::size_t input_count(int batch) const { return std::size_t(batch) * geometry_.input.size(); }
  std::size_t output_count(int batch) const {
    return std::size_t(batch) * geometry_.output().size();
  }

  std::unique_ptr<kernels::ConvolutionKernel> cpu_;
  kernels::ConvolutionGeometry geometry_;
  Emulation& emulation_;
  std::vector<float> x_, weights_, dy_;  // the bf16 operands
};

// Batch norm and pooling compute in float on the GPU too; with bf16 images they store bf16.
class EmulatedBatchNorm final : public kernels::BatchNormKernel {
 public:
  EmulatedBatchNorm(std::unique_ptr<kernels::BatchNormKernel> cpu,
                    const kernels::BatchNormGeometry& geometry, Emulation& emulation)
      : cpu_(std::move(cpu)), geometry_(geometry), emulation_(emulation) {}

  void forward(int batch, const float* x, const float* scale, const float* shift,
               float* y) override {
    cpu_->forward(batch, x, scale, shift, y);
    emulation_.store_image(geometry_.layout, y, std::size_t(batch) * geometry_.shape.size());
  }
  void backward(int batch, const float* x, const float* scale, const float* shift, const float* dy,
                float* dx, float* scale_gradient, float* shift_gradient) override {
    cpu_->backward(batch, x, scale, shift, dy, dx, scale_gradient, shift_gradient);
    emulation_.store_image(geometry_.layout, dx, std::size_t(batch) * geometry_.shape.size());
  }

 private:
  std::unique_ptr<kernels::BatchNormKernel> cpu_;
  kernels::BatchNormGeometry geometry_;
  Emulation& emulation_;
};

class EmulatedPooling final : public kernels::PoolingKernel {
 public:
  EmulatedPooling(std::unique_ptr<kernels::PoolingKernel> cpu,
                  const kernels::PoolingGeometry& geometry, Emulation& emulation)
      : cpu_(std::move(cpu)), geometry_(geometry), emulation_(emulation) {}

  void forward(int batch, const float* x, float* y) override {
    cpu_->forward(batch, x, y);
    emulation_.store_image(geometry_.output_layout, y,
                           std::size_t(batch) * geometry_.output().size());
  }
  void backward(int batch, const float* dy, float* dx) override {
    cpu_->backward(batch, dy, dx);
    emulation_.store_image(geometry_.input_layout, dx, std::size_t(batch) * geometry_.input.size());
  }

 private:
  std::unique_ptr<kernels::PoolingKernel> cpu_;
  kernels::PoolingGeometry geometry_;
  Emulation& emulation_;
};

// The values a row-major [rows x cols] matrix with leading dimension `ld` spans.
std::size_t stored_count(int rows, int cols, int ld) {
  return rows <= 0 || cols <= 0 ? 0 : std::size_t(rows - 1) * ld + cols;
}

// The CPU's float math, with bf16 GEMM operands (a dense layer's backward reaches gemm() through
// MathOps' default linear_backward) and bf16 native images; every other op forwards unchanged.
class EmulatedMath final : public kernels::MathOps<float> {
 public:
  EmulatedMath(kernels::MathOps<float>& cpu, Emulation& emulation)
      : cpu_(cpu), emulation_(emulation) {}

  void gemm(kernels::Transpose transpose_a, kernels::Transpose transpose_b, int m, int n, int k,
            float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c,
            int ldc) override {
    const bool a_plain = transpose_a == kernels::Transpose::no;
    const bool b_plain = transpose_b == kernels::Transpose::no;
    a = emulation_.operand(a_, a, a_plain ? stored_count(m, k, lda) : stored_count(k, m, lda));
    b = emulation_.operand(b_, b, b_plain ? stored_count(k, n, ldb) : stored_count(n, k, ldb));
    cpu_.gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void native_image_relu_forward(std::size_t count, float ceiling, const float* x,
                                 float* y) override {
    cpu_.relu_forward(count, ceiling, x, y);
    emulation_.store_image(ImageLayout::native, y, count);
  }
  void native_image_relu_backward(std::size_t count, float ceiling, const float* y, const float* dy,
                                  float* dx) override {
    cpu_.relu_backward(count, ceiling, y, dy, dx);
    emulation_.store_image(ImageLayout::native, dx, count);
  }
  void native_image_add(std::size_t count, const float* a, const float* b, float* y) override {
    cpu_.add(count, a, b, y);
    emulation_.store_image(ImageLayout::native, y, count);
  }

  void add_row_bias(int rows, int cols, const float* bias, float* y) override {
    cpu_.add_row_bias(rows, cols, bias, y);
  }
  void column_sums(int rows, int cols, const float* dy, float* sums) override {
    cpu_.column_sums(rows, cols, dy, sums);
  }
  void relu_forward(std::size_t count, float ceiling, const float* x, float* y) override {
    cpu_.relu_forward(count, ceiling, x, y);
  }
  void relu_backward(std::size_t count, float ceiling, const float* y, const float* dy,
                     float* dx) override {
    cpu_.relu_backward(count, ceiling, y, dy, dx);
  }
  void add(std::size_t count, const float* a, const float* b, float* y) override {
    cpu_.add(count, a, b, y);
  }
  void sigmoid_forward(std::size_t count, const float* x, float* y) override {
    cpu_.sigmoid_forward(count, x, y);
  }
  void sigmoid_backward(std::size_t count, const float* y, const float* dy, float* dx) override {
    cpu_.sigmoid_backward(count, y, dy, dx);
  }
  void embedding_forward(int rows, int width, const float* ids, const float* table,
                         float* y) override {
    cpu_.embedding_forward(rows, width, ids, table, y);
  }
  void embedding_backward(int rows, int width, int vocabulary, const float* ids, const float* dy,
                          float* table_gradient, bool add_to_gradient) override {
    cpu_.embedding_backward(rows, width, vocabulary, ids, dy, table_gradient, add_to_gradient);
  }
  void layer_norm_forward(int rows, int width, const float* x, const float* scale_shift, float* y,
                          float* mean, float* variance) override {
    cpu_.layer_norm_forward(rows, width, x, scale_shift, y, mean, variance);
  }
  void layer_norm_backward(int rows, int width, const float* x, const float* scale_shift,
                           const float* mean, const float* variance, const float* dy, float* dx,
                           float* scale_shift_gradient) override {
    cpu_.layer_norm_backward(rows, width, x, scale_shift, mean, variance, dy, dx,
                             scale_shift_gradient);
  }
  void gelu_forward(std::size_t count, const float* x, float* y) override {
    cpu_.gelu_forward(count, x, y);
  }
  void gelu_backward(std::size_t count, const float* x, const float* dy, float* dx) override {
    cpu_.gelu_backward(count, x, dy, dx);
  }
  void causal_softmax_forward(int heads, int rows, float* scores) override {
    cpu_.causal_softmax_forward(heads, rows, scores);
  }
  void causal_softmax_backward(int heads, int rows, const float* probabilities,
                               float* gradient) override {
    cpu_.causal_softmax_backward(heads, rows, probabilities, gradient);
  }
  void softmax_cross_entropy(int rows, int classes, const float* logits, const std::int32_t* labels,
                             float* dlogits, float* loss) override {
    cpu_.softmax_cross_entropy(rows, classes, logits, labels, dlogits, loss);
  }
  void sgd_momentum_update(std::size_t count, float learning_rate, float momentum,
                           float gradient_scale, const float* gradient, float* velocity,
                           float* parameters, std::int32_t* nonfinite_gradient,
                           double* squared_norm) override {
    cpu_.sgd_momentum_update(count, learning_rate, momentum, gradient_scale, gradient, velocity,
                             parameters, nonfinite_gradient, squared_norm);
  }
  void adamw_update(std::size_t count, float learning_rate,
                    const kernels::AdamWHyperparameters<float>& hyperparameters,
                    float gradient_scale, const float* gradient, float* first_moment,
                    float* second_moment, float* parameters, std::int64_t* step_count,
                    std::int32_t* nonfinite_gradient, double* squared_norm) override {
    cpu_.adamw_update(count, learning_rate, hyperparameters, gradient_scale, gradient, first_moment,
                      second_moment, parameters, step_count, nonfinite_gradient, squared_norm);
  }
  void squared_norm(std::size_t count, const float* x, double* squared_norm) override {
    cpu_.squared_norm(count, x, squared_norm);
  }

 private:
  kernels::MathOps<float>& cpu_;
  Emulation& emulation_;
  std::vector<float> a_, b_;  // the bf16 operands
};

// The CPU device (one thread, so every run sums in one order) with the kernels above.
class EmulatedBf16Cpu final : public testing::CpuDeviceWithImageKernels {
 public:
  explicit EmulatedBf16Cpu(Emulation emulation)
      : emulation_(std::move(emulation)), math_(cpu_.math_float(), emulation_) {}

  std::unique_ptr<kernels::ConvolutionKernel> make_convolution(
      const kernels::ConvolutionGeometry& geometry) override {
    return std::make_unique<EmulatedConvolution>(cpu_.make_convolution(geometry), geometry,
                                                 emulation_);
  }
  std::unique_ptr<kernels::PoolingKernel> make_pooling(
      const kernels::PoolingGeometry& geometry) override {
    return std::make_unique<EmulatedPooling>(cpu_.make_pooling(geometry), geometry, emulation_);
  }
  std::unique_ptr<kernels::BatchNormKernel> make_batch_norm(
      const kernels::BatchNormGeometry& geometry) override {
    return std::make_unique<EmulatedBatchNorm>(cpu_.make_batch_norm(geometry), geometry,
                                               emulation_);
  }
  kernels::MathOps<float>& math_float() override { return math_; }

 private:
  Emulation emulation_;
  EmulatedMath math_;
};

// Each input value times 1 +- 2^-8: between half a bf16 ulp and one (bf16 keeps 8 significant
// bits), so that the first convolution's bf16 operand moves by about one ulp.
void move_by_about_a_bf16_ulp(std::vector<float>& values, std::uint64_t seed,
                              std::uint64_t stream) {
  const CounterRandom random(seed, stream);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] *= random.uniform(i) < 0.5 ? 1.0f - 0x1p-8f : 1.0f + 0x1p-8f;
}

struct Options {
  std::string model = "resnet-56";
  int batch = 4;
  int samples = 41;
};

// What a sampled run changes: engine-like noise (from seed 77 + sample) or inputs moved (by seed
// 1001 + sample, each batch its own stream).
enum class Perturbation { none, engine_noise, moved_inputs };

// The GPU test's three steps, emulated.
std::vector<double> three_step_losses(const Options& options, Rounding rounding,
                                      Perturbation perturbation = Perturbation::none,
                                      int sample = 0) {
  std::optional<std::uint32_t> noise_seed;
  if (perturbation == Perturbation::engine_noise) noise_seed = 77 + sample;
  EmulatedBf16Cpu device(Emulation(rounding, noise_seed));
  auto batches = testing::three_step_batches(options.model, options.batch);
  if (perturbation == Perturbation::moved_inputs)
    for (std::size_t index = 0; index < batches.size(); ++index)
      move_by_about_a_bf16_ulp(batches[index].inputs, 1001 + sample, index);
  return testing::train_three_steps(device, options.model, options.batch, batches).loss;
}

// One line per rounding: each step's loss over the samples, as mean +- sd (min..max).
void print_loss_spread(const Options& options, Perturbation perturbation) {
  for (Rounding rounding : {Rounding::float_images, Rounding::bf16_images}) {
    std::array<std::vector<double>, testing::three_steps> by_step;
    for (int sample = 0; sample < options.samples; ++sample) {
      const std::vector<double> losses = three_step_losses(options, rounding, perturbation, sample);
      for (int step = 0; step < testing::three_steps; ++step) by_step[step].push_back(losses[step]);
    }
    std::cout << fmt::format("  {:12}", name_of(rounding));
    for (const std::vector<double>& losses : by_step) {
      const results::PhaseStatistics described = analysis::describe(losses);
      double squares = 0;
      for (double loss : losses) squares += (loss - described.mean) * (loss - described.mean);
      const double sd = std::sqrt(squares / double(losses.size() - 1));
      std::cout << fmt::format("  {:.4f} +- {:.4f} ({:.4f}..{:.4f})", described.mean, sd,
                               described.min, described.max);
    }
    std::cout << "\n";
  }
}

// One residual block of resnet-56's second stage, alone: its output, input gradient and parameter
// gradients for a fixed bf16 input (a ReLU's output) and output gradient. The projection block
// halves the image and doubles the channels through a 1x1 convolution on its shortcut.
struct BlockResults {
  std::vector<float> output, input_gradient, parameter_gradients;
};

BlockResults run_block(Rounding rounding, bool projection, int batch) {
  EmulatedBf16Cpu device(Emulation(rounding, std::nullopt));
  const int input_channels = projection ? 16 : 32, channels = 32, stride = projection ? 2 : 1;
  const int side = projection ? 32 : 16;
  workloads::PlanBuilder plan(kernels::ImageShape{input_channels, side, side}, ImageLayout::native);
  std::function<void(workloads::PlanBuilder&)> shortcut;
  if (projection)
    shortcut = [&](workloads::PlanBuilder& path) {
      path.convolution(channels, 1, stride, 0, 1, false).batch_norm();
    };
  plan.residual(
      [&](workloads::PlanBuilder& path) {
        path.convolution(channels, 3, stride, 1, 1, false).batch_norm().relu();
        path.convolution(channels, 3, 1, 1, 1, false).batch_norm();
      },
      shortcut, true);
  const auto block = workloads::build_layer(device, plan.layers().front(), batch);

  std::vector<float> host_parameters(block->parameter_count());
  block->initialize(host_parameters, /*seed=*/5, /*layer_index=*/3);
  kernels::DeviceArray<float> parameters(device, host_parameters.size());
  kernels::DeviceArray<float> gradients(device, host_parameters.size());
  parameters.copy_from_host(host_parameters);
  block->bind(parameters.data(), gradients.data());

  const std::size_t input_count = std::size_t(batch) * block->input_size();
  const std::size_t output_count = std::size_t(batch) * block->output_size();
  std::vector<float> host_x(input_count), host_dy(output_count);
  std::mt19937 engine(3);
  std::normal_distribution<float> normal;
  for (float& value : host_x) value = to_bf16(std::max(0.0f, normal(engine)));
  for (float& value : host_dy) value = to_bf16(0.01f * normal(engine));
  kernels::DeviceArray<float> x(device, input_count), y(device, output_count);
  kernels::DeviceArray<float> dy(device, output_count), dx(device, input_count);
  x.copy_from_host(host_x);
  dy.copy_from_host(host_dy);
  block->forward(device.math_float(), batch, x.data(), y.data());
  block->backward(device.math_float(), batch, x.data(), y.data(), dy.data(), dx.data());

  return {y.to_host(), dx.to_host(), gradients.to_host()};
}

Options parse_options(int argc, char** argv) {
  Options options;
  po::options_description description("dlscale-bench-bf16-image-emulation options");
  // clang-format off
  description.add_options()
      ("help,h", "this help")
      ("model", po::value(&options.model)->default_value(options.model), "workload to train")
      ("batch", po::value(&options.batch)->default_value(options.batch), "samples per step")
      ("samples", po::value(&options.samples)->default_value(options.samples),
       "runs per rounding in (2) and (3)");
  // clang-format on
  po::variables_map values;
  po::store(po::parse_command_line(argc, argv, description), values);
  po::notify(values);
  if (values.count("help")) {
    std::cout << description;
    std::exit(0);
  }
  if (options.batch < 1 || options.samples < 2)
    throw std::invalid_argument("--batch must be at least 1 and --samples at least 2");
  return options;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse_options(argc, argv);
  std::cout << fmt::format("{} batch {}: bf16 rounding emulated on the CPU\n", options.model,
                           options.batch);

  std::cout << "(1) three-step losses at the GPU test's seeds and batches\n";
  for (Rounding rounding : {Rounding::fp32, Rounding::float_images, Rounding::bf16_images}) {
    const std::vector<double> losses = three_step_losses(options, rounding);
    std::cout << fmt::format("  {:12}  {:.4f} {:.4f} {:.4f}\n", name_of(rounding), losses[0],
                             losses[1], losses[2]);
  }

  std::cout << fmt::format(
      "(2) each step's loss over {} runs with every convolution result times 1 +- 2^-22\n"
      "  images        mean +- sd (min..max) of steps 0, 1 and 2\n",
      options.samples);
  print_loss_spread(options, Perturbation::engine_noise);

  std::cout << fmt::format(
      "(3) the same over {} runs with every input times 1 +- 2^-8 (about a bf16 ulp)\n",
      options.samples);
  print_loss_spread(options, Perturbation::moved_inputs);

  std::cout << fmt::format(
      "(4) one residual block alone (32 channels, batch {}), relative L2 against fp32\n"
      "  block       images        output  input gradient  parameter gradients\n",
      options.batch);
  for (bool projection : {false, true}) {
    const BlockResults fp32 = run_block(Rounding::fp32, projection, options.batch);
    for (Rounding rounding : {Rounding::float_images, Rounding::bf16_images}) {
      const BlockResults emulated = run_block(rounding, projection, options.batch);
      std::cout << fmt::format(
          "  {:10}  {:12}  {:6.4f}  {:14.4f}  {:19.4f}\n", projection ? "projection" : "identity",
          name_of(rounding), kernels::relative_l2(fp32.output, emulated.output),
          kernels::relative_l2(fp32.input_gradient, emulated.input_gradient),
          kernels::relative_l2(fp32.parameter_gradients, emulated.parameter_gradients));
    }
  }
  return 0;
} catch (const std::exception& error) {
  std::cerr << "dlscale-bench-bf16-image-emulation: " << error.what() << "\n";
  return 1;
}
