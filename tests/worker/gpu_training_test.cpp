// A GPU trains as the CPU does: after 3 steps from the same weights on the same data, every
// parameter of a CUDA run agrees with the CPU run's, for a fully connected net, CNNs with batch
// norm and residual blocks, an LSTM and GPTs (the CNNs that amplify rounding: within what rounding
// alone does to the CPU's own three steps). The steps after the first are replayed CUDA graphs,
// so this also checks that a captured step computes what an eager one does. Labelled `gpu`.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/random.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "tests/kernels/scoped_setting.hpp"
#include "tests/workloads/float_gradient_yardstick.hpp"
#include "tests/workloads/layer_gradient_comparison.hpp"
#include "tests/workloads/three_step_spread.hpp"
#include "worker/device_dataset.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::worker {
namespace {

constexpr std::uint64_t seed = testing::three_steps_seed;

struct Case {
  std::string model;
  int batch;
  // resnet-56 and mobilenet-v2 at these batches amplify float rounding to percents of a layer's
  // gradient (tests/workloads/float_gradient_conditioning_test.cpp): no two float devices agree
  // closer, so the GPU's first gradients are held to the exact image kernels within rounding's
  // own reach instead, and its three steps to the CPU's within what rounding does to those
  // (tests/workloads/three_step_spread_test.cpp).
  bool amplifies_rounding;
  // GPU settings (DLSCALE_* variable and value) the case's GPU device is made under: kernels that
  // are not yet the defaults, held to the same bounds.
  std::vector<std::pair<std::string, std::string>> settings = {};
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.model << " batch " << c.batch;
  for (const auto& [variable, value] : c.settings) *out << " " << variable << "=" << value;
}

// e.g. resnet_56_batch4_nchw_batch_norm_own: the model and batch, then each setting's name (less
// DLSCALE_CUDA_) and value, so that a ctest slice's filter on the model picks its settings' cases
// too.
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name;
  const auto add = [&name](const std::string& text) {
    for (char c : text)
      name += std::isalnum(static_cast<unsigned char>(c))
                  ? char(std::tolower(static_cast<unsigned char>(c)))
                  : '_';
  };
  add(info.param.model);
  name += "_batch" + std::to_string(info.param.batch);
  for (const auto& [variable, value] : info.param.settings) {
    const std::string prefix = "DLSCALE_CUDA_";
    name += '_';
    add(variable.rfind(prefix, 0) == 0 ? variable.substr(prefix.size()) : variable);
    name += '_';
    add(value);
  }
  return name;
}

// A case's settings, set for one scope; with any, the legacy path too (whose kernels they choose),
// whatever DLSCALE_CUDNN_API the environment has.
class CaseSettings {
 public:
  explicit CaseSettings(const Case& c) : case_(c) {
    if (!c.settings.empty())
      set_.push_back(std::make_unique<testing::ScopedSetting>("DLSCALE_CUDNN_API", "legacy"));
    for (const auto& [variable, value] : c.settings)
      set_.push_back(std::make_unique<testing::ScopedSetting>(variable.c_str(), value.c_str()));
  }

  // The device runs the case's settings: its changed_settings name each ("nchw_pooling own" for
  // DLSCALE_CUDA_NCHW_POOLING=own).
  void expect_recorded_by(const kernels::CudaDevice& device) const {
    std::string changed;
    for (const auto& [name, value] : device.properties())
      if (name == "changed_settings") changed = value;
    const std::string prefix = "DLSCALE_CUDA_";
    for (const auto& [variable, value] : case_.settings) {
      std::string record = variable.substr(variable.rfind(prefix, 0) == 0 ? prefix.size() : 0);
      for (char& c : record) c = char(std::tolower(static_cast<unsigned char>(c)));
      record += " " + value;
      EXPECT_NE(changed.find(record), std::string::npos)
          << variable << "=" << value << " did not run: changed_settings '" << changed << "'";
    }
  }

 private:
  const Case& case_;
  std::vector<std::unique_ptr<testing::ScopedSetting>> set_;
};

// Three GPU steps against the CPU's where the network does not amplify rounding (fcn, alexnet-r,
// the LSTM, GPTs). Float sums in a different order differ by rounding; 3 steps of lr 0.01 keep
// that far below the update itself (checked too), so a wrong kernel cannot hide inside the
// tolerance. A near-tie in a max pool that the GPU's rounding flipped would break this: a 1-ulp
// move of the inputs flips one of alexnet-r's at batch 8 in 1 of 13 tries on the CPU (0.15 of
// the update).
void expect_as_the_cpu(const std::string& model, const testing::ThreeSteps& on_cpu,
                       const testing::ThreeSteps& on_gpu) {
  ASSERT_EQ(on_cpu.parameters.size(), on_gpu.parameters.size());
  const testing::ParameterDifference difference =
      testing::largest_parameter_difference(on_cpu.parameters, on_gpu.parameters);
  EXPECT_LT(difference.largest, 2e-4) << model << ": parameter " << difference.index << " is "
                                      << on_cpu.parameters[difference.index] << " on the CPU and "
                                      << on_gpu.parameters[difference.index] << " on the GPU";
  EXPECT_GT(testing::largest_parameter_update(model, on_cpu.parameters), 20 * difference.largest)
      << model << ": the steps moved too little";
  for (int step = 0; step < testing::three_steps; ++step)
    EXPECT_NEAR(on_gpu.loss[step], on_cpu.loss[step], 1e-3 * (1 + on_cpu.loss[step]))
        << model << ", loss of step " << step;
}

class GpuTrainsLikeTheCpu : public ::testing::TestWithParam<Case> {};

// One forward and backward from the same weights and batch: each layer's gradient agrees, and a
// failure names every layer that differs, last layer first, so the culprit is the first named.
TEST_P(GpuTrainsLikeTheCpu, FirstGradientsAgreeLayerByLayer) {
  const auto& [model, batch, amplifies_rounding, settings] = GetParam();
  const CaseSettings set(GetParam());
  if (amplifies_rounding) {
    const testing::FloatGradientYardstick& yardstick =
        testing::float_gradient_yardstick(model, batch);
    kernels::CudaDevice gpu(0, kernels::Precision::fp32);
    set.expect_recorded_by(gpu);
    std::string table = model + " batch " + std::to_string(batch) + "\n";
    const std::string beyond = testing::beyond_rounding(
        yardstick, testing::first_gradients(gpu, model, batch), "GPU", table);
    std::cout << table;
    EXPECT_TRUE(beyond.empty()) << model << beyond;
    return;
  }
  const auto workload = workloads::make_workload(model);
  const auto gradients_on = [&](kernels::Device& device) {
    const DeviceDataset data(device, *workload, batch, 1, seed, 0);
    auto network = workload->build_network(device, batch);
    network->initialize(seed);
    network->forward_loss(batch, data.inputs(0), data.labels(0));
    network->backward(batch, data.inputs(0));
    std::vector<float> gradients(network->gradients().size());
    device.copy_to_host(gradients.data(), network->gradients().data(),
                        gradients.size() * sizeof(float));
    std::vector<testing::LayerParameters> layers;
    for (const auto& layer : network->layers())
      layers.push_back({layer->kind(), layer->parameter_count()});
    return std::pair{gradients, layers};
  };
  kernels::CpuDevice cpu(1);
  kernels::CudaDevice gpu(0, kernels::Precision::fp32);
  set.expect_recorded_by(gpu);
  const auto [on_cpu, layers] = gradients_on(cpu);
  const auto on_gpu = gradients_on(gpu).first;
  const std::string differing = testing::layers_that_differ(on_cpu, on_gpu, layers, 1e-3);
  EXPECT_TRUE(differing.empty()) << model << ": gradients differ" << differing;
}

// Three steps from the same weights on the same two batches (steps 1 and 2 replay the graph of a
// different batch than step 0 ran).
TEST_P(GpuTrainsLikeTheCpu, ParametersAgreeAfterThreeSteps) {
  const auto& [model, batch, amplifies_rounding, settings] = GetParam();
  const CaseSettings set(GetParam());
  kernels::CudaDevice gpu(0, kernels::Precision::fp32);
  set.expect_recorded_by(gpu);
  const testing::ThreeSteps on_gpu = testing::train_three_steps(gpu, model, batch);
  if (amplifies_rounding) {
    // Rounding alone ends the CPU's own three steps 0.11 to 0.34 (resnet-56) and 0.44 to 0.61
    // (mobilenet-v2) of the largest update apart here, the exact image kernels 0.34 and 0.53, and
    // their losses up to 0.3 apart (tests/workloads/three_step_spread_test.cpp); the H200's GPU
    // was 0.35 and 0.6 of the update from the CPU (issue 30). So the GPU is held to that spread:
    // its parameters then catch only gross errors, while the second step's loss, which rounding
    // moves by up to 0.03, still catches a replay of the wrong batch (0.67 and 0.89). The other
    // networks hold the replayed steps and the momentum to the strict bounds below.
    const testing::ThreeStepSpread& spread = testing::three_step_spread(model, batch);
    std::cout << spread.table;
    const testing::ParameterDifference difference =
        testing::largest_parameter_difference(spread.cpu.parameters, on_gpu.parameters);
    std::cout << fmt::format(
        "  GPU                {:10.4g} ({:5.3f}) {:10.3g} {:10.3g} {:10.3g}\n", difference.largest,
        difference.largest / spread.largest_update, on_gpu.loss[0] - spread.cpu.loss[0],
        on_gpu.loss[1] - spread.cpu.loss[1], on_gpu.loss[2] - spread.cpu.loss[2]);
    EXPECT_LT(difference.largest, testing::allowed_parameter_difference(spread))
        << model << ": parameter " << difference.index << " is "
        << spread.cpu.parameters[difference.index] << " on the CPU and "
        << on_gpu.parameters[difference.index] << " on the GPU";
    for (int step = 0; step < testing::three_steps; ++step)
      EXPECT_NEAR(on_gpu.loss[step], spread.cpu.loss[step],
                  testing::allowed_loss_difference(spread, step))
          << model << ", loss of step " << step;
    return;
  }
  kernels::CpuDevice cpu(1);
  expect_as_the_cpu(model, testing::train_three_steps(cpu, model, batch), on_gpu);
}

INSTANTIATE_TEST_SUITE_P(
    Workloads, GpuTrainsLikeTheCpu,
    ::testing::Values(
        Case{"fcn:64,48,32,10", 16, false}, Case{"alexnet-r", 8, false}, Case{"resnet-56", 4, true},
        Case{"mobilenet-v2", 2, true}, Case{"lstm:12,32,2,100", 4, false},
        // issue 35: one pass of 4 heads, then two passes
        // (8 heads) over 40 steps
        Case{"gpt-tiny", 4, false}, Case{"gpt:2,64,8,40,128", 2, false},
        // The legacy path's own NCHW kernels (docs/gpu.md),
        // off by default until a GPU has run them
        Case{"alexnet-r", 8, false, {{"DLSCALE_CUDA_NCHW_BIAS_RELU", "fused"}}},
        Case{"alexnet-r", 8, false, {{"DLSCALE_CUDA_NCHW_POOLING", "own"}}},
        Case{"alexnet-r",
             8,
             false,
             {{"DLSCALE_CUDA_NCHW_BIAS_RELU", "fused"}, {"DLSCALE_CUDA_NCHW_POOLING", "own"}}},
        Case{"resnet-56", 4, true, {{"DLSCALE_CUDA_NCHW_BATCH_NORM", "own"}}},
        Case{"mobilenet-v2", 2, true, {{"DLSCALE_CUDA_NCHW_BATCH_NORM", "own"}}}),
    case_name);

// bf16 images (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16: activations and their gradients bf16 between
// image layers, as autocast keeps them) against float images, both under --precision bf16 on the
// graph path, each against the fp32 GPU: bf16 images round every activation and gradient once
// more, so their first gradients may stray further from fp32's than bf16 math alone takes them,
// but not by more than a small factor (or a floor of 5% of a layer's largest gradient, for layers
// that bf16 math leaves nearly exact). A kernel that read bf16 as float, or wrote float where
// bf16 is read, is off by orders of magnitude. Then three trained steps (the later two replayed
// CUDA graphs) keep their losses within 2% of the float images'. Not where the network amplifies
// rounding: there bf16 math alone leaves the first gradients of resnet-56 (batch 4) and
// mobilenet-v2 (batch 2) up to 1.2 and 1.8 of a layer's largest gradient from fp32's (an H200,
// 2026-11-27), and float images' own third-step loss ended at 1.26, 1.44 and 1.62 in three
// processes (engines chosen by timing). There the later losses of bf16 images must fall inside
// the spread of float images' losses over inputs moved by about a bf16 ulp (five samples, widened
// by their own range: the tail beyond the largest of five). On that H200 resnet-56's bf16 images
// ended its third step at 0.69 to 1.01, below all three float-image runs. The networks cover every
// kernel that reads or writes bf16 images: convolution with a fused ReLU, max pooling into a dense
// layer (alexnet-r); batch norm with its ReLU, the residual sum and ReLU, global average pooling
// (resnet-56); depthwise convolution and ReLU6 (mobilenet-v2).
class Bf16ImagesStayWithinBf16Rounding : public ::testing::TestWithParam<Case> {};

// Every value moved by about a bf16 ulp (a relative 2^-8: half an ulp to one) up or down, the
// direction drawn from `seed` and `stream`: the rounding bf16 images add, where a float ulp would
// vanish in bf16 math.
void move_by_a_bf16_ulp(std::vector<float>& values, std::uint64_t seed, std::uint64_t stream) {
  const CounterRandom random(seed, stream);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] *= random.uniform(i) < 0.5 ? 1.0f - 1.0f / 256 : 1.0f + 1.0f / 256;
}

TEST_P(Bf16ImagesStayWithinBf16Rounding, FirstGradientsAndThreeSteps) {
  if (!kernels::cudnn_graph_api_compiled())
    GTEST_SKIP() << "this build has no cuDNN graph path, where bf16 images live";
  const auto& [model, batch, amplifies_rounding, settings] = GetParam();
  ASSERT_TRUE(settings.empty()) << "the bf16-image cases run on the graph path's own settings";
  const testing::ScopedSetting graph("DLSCALE_CUDNN_API", "graph");
  kernels::CudaDevice fp32(0, kernels::Precision::fp32);
  const testing::FirstGradients reference = testing::first_gradients(fp32, model, batch);
  const auto run_with = [&](const char* images) {
    const testing::ScopedSetting setting("DLSCALE_CUDA_IMAGE_ACTIVATIONS", images);
    kernels::CudaDevice bf16(0, kernels::Precision::bf16);
    EXPECT_EQ(bf16.context().native_is_bf16(), std::string(images) == "bf16");
    return std::pair{testing::first_gradients(bf16, model, batch),
                     testing::train_three_steps(bf16, model, batch)};
  };
  const auto [float_images, float_steps] = run_with("float");
  const auto [bf16_images, bf16_steps] = run_with("bf16");
  const auto math_only = testing::relative_layer_differences(reference, float_images);
  const auto with_images = testing::relative_layer_differences(reference, bf16_images);
  std::string table = fmt::format(
      "{} batch {}: layer, largest gradient difference from fp32 as a "
      "share of the layer's largest (float images, bf16 images)\n",
      model, batch);
  std::string beyond;
  std::size_t with_parameters = 0;
  for (const auto& layer : reference.layers) {
    if (layer.count == 0) continue;
    const std::size_t l = with_parameters++;
    table +=
        fmt::format("  {:3} {:20} {:9.4f} {:9.4f}\n", l, layer.kind, math_only[l], with_images[l]);
    if (!(with_images[l] <= std::max(4 * math_only[l], 0.05)))
      beyond += fmt::format(" {} ({}: {:.4f} against {:.4f})", l, layer.kind, with_images[l],
                            math_only[l]);
  }
  std::cout << table;
  EXPECT_TRUE(beyond.empty()) << model << ": bf16 images beyond bf16 rounding in layers" << beyond;
  if (!amplifies_rounding) {
    for (int step = 0; step < testing::three_steps; ++step)
      EXPECT_NEAR(bf16_steps.loss[step], float_steps.loss[step], 0.02 * float_steps.loss[step])
          << model << ", loss of step " << step;
    return;
  }
  // The first step's loss (the forward pass, before any update) is not amplified.
  EXPECT_NEAR(bf16_steps.loss[0], float_steps.loss[0], 0.02 * float_steps.loss[0]) << model;
  std::array<std::pair<double, double>, testing::three_steps> range;
  for (int step = 0; step < testing::three_steps; ++step)
    range[step] = {float_steps.loss[step], float_steps.loss[step]};
  {
    const testing::ScopedSetting setting("DLSCALE_CUDA_IMAGE_ACTIVATIONS", "float");
    kernels::CudaDevice bf16(0, kernels::Precision::bf16);
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      auto batches = testing::three_step_batches(model, batch);
      for (std::size_t b = 0; b < batches.size(); ++b)
        move_by_a_bf16_ulp(batches[b].inputs, seed, b);
      const testing::ThreeSteps moved = testing::train_three_steps(bf16, model, batch, batches);
      for (int step = 0; step < testing::three_steps; ++step)
        range[step] = {std::min(range[step].first, moved.loss[step]),
                       std::max(range[step].second, moved.loss[step])};
    }
  }
  for (int step = 1; step < testing::three_steps; ++step) {
    const auto [low, high] = range[step];
    std::cout << fmt::format(
        "{} step {}: float images' losses {:.4f} to {:.4f}, bf16 images' {:.4f}\n", model, step,
        low, high, bf16_steps.loss[step]);
    EXPECT_GE(bf16_steps.loss[step], low - (high - low)) << model << ", loss of step " << step;
    EXPECT_LE(bf16_steps.loss[step], high + (high - low)) << model << ", loss of step " << step;
  }
}

// On bf16 images, the two replayed CUDA graphs of three trained steps give the eager steps'
// losses and parameters bit for bit (one device, so both use the same engines): a value that a
// replay reads stale, or a buffer it reads before the step writes it, shows here even where the
// network amplifies rounding (resnet-56: residual sums and ReLUs, batch norm with its ReLU,
// projection shortcuts on bf16 images).
TEST(Bf16Images, ReplayedStepsEqualEagerOnesBitForBit) {
  if (!kernels::cudnn_graph_api_compiled())
    GTEST_SKIP() << "this build has no cuDNN graph path, where bf16 images live";
  const testing::ScopedSetting graph("DLSCALE_CUDNN_API", "graph");
  const testing::ScopedSetting images("DLSCALE_CUDA_IMAGE_ACTIVATIONS", "bf16");
  kernels::CudaDevice bf16(0, kernels::Precision::bf16);
  ASSERT_TRUE(bf16.context().native_is_bf16());
  for (const auto& [model, batch] : {std::pair{"resnet-56", 4}, std::pair{"alexnet-r", 8}}) {
    const auto batches = testing::three_step_batches(model, batch);
    const testing::ThreeSteps eager =
        testing::train_three_steps(bf16, model, batch, batches, false);
    const testing::ThreeSteps replayed = testing::train_three_steps(bf16, model, batch, batches);
    EXPECT_EQ(replayed.loss, eager.loss) << model;
    const testing::ParameterDifference difference =
        testing::largest_parameter_difference(eager.parameters, replayed.parameters);
    EXPECT_EQ(difference.largest, 0.0) << model << ": parameter " << difference.index;
  }
}

// An LSTM stack in one cuDNN call (the default) and a cuDNN call per layer
// (DLSCALE_CUDNN_LSTM_STACK=no) each train as the CPU's layers do: the stacked network's
// parameters lie in the layers' order (tests/workloads/lstm_stack_test.cpp), so its three steps
// are held to the CPU's, which builds the layers apart, within the bounds of GpuTrainsLikeTheCpu;
// and the replayed steps (a multi-layer cuDNN RNN, or one per layer, captured in a CUDA graph)
// equal the eager ones bit for bit.
TEST(LstmStack, TrainsAsTheCpusLayersAndReplaysItsEagerSteps) {
  const std::string model = "lstm:12,32,2,100";
  constexpr int batch = 4;
  const auto batches = testing::three_step_batches(model, batch);
  kernels::CpuDevice cpu(1);
  const testing::ThreeSteps on_cpu = testing::train_three_steps(cpu, model, batch, batches);
  for (const char* stack : {"yes", "no"}) {
    SCOPED_TRACE(std::string("DLSCALE_CUDNN_LSTM_STACK=") + stack);
    const testing::ScopedSetting setting("DLSCALE_CUDNN_LSTM_STACK", stack);
    kernels::CudaDevice gpu(0, kernels::Precision::fp32);
    ASSERT_EQ(gpu.runs_lstm_stacks(), std::string(stack) == "yes");
    const testing::ThreeSteps replayed = testing::train_three_steps(gpu, model, batch, batches);
    const testing::ThreeSteps eager = testing::train_three_steps(gpu, model, batch, batches, false);
    EXPECT_EQ(replayed.loss, eager.loss);
    const testing::ParameterDifference replay_difference =
        testing::largest_parameter_difference(eager.parameters, replayed.parameters);
    EXPECT_EQ(replay_difference.largest, 0.0) << "parameter " << replay_difference.index;

    expect_as_the_cpu(model, on_cpu, replayed);
  }
}

INSTANTIATE_TEST_SUITE_P(ImageWorkloads, Bf16ImagesStayWithinBf16Rounding,
                         ::testing::Values(Case{"alexnet-r", 8, false}, Case{"resnet-56", 4, true},
                                           Case{"mobilenet-v2", 2, true}),
                         case_name);

}  // namespace
}  // namespace dlscale::worker
