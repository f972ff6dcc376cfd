// Three SGD steps of a network on a device (the training loop on one rank), and how far float
// rounding alone moves their result on the CPU: the CPU device trained again in plain NCHW and on
// inputs moved by 1, 2 and 4 float ulps. resnet-56 (batch 4) and mobilenet-v2 (batch 2) amplify
// rounding to percents of a layer's gradient at the first step
// (tests/workloads/float_gradient_yardstick.hpp); after three steps the CPU's own runs end a tenth
// to two thirds of the largest update apart and their losses up to 0.3 apart, so a GPU is held to
// that spread there (tests/worker/gpu_training_test.cpp; the spread is shown by
// tests/workloads/three_step_spread_test.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/cpu_device.hpp"
#include "model/sgd_momentum.hpp"
#include "tests/comm/allreduce_only_communicator.hpp"
#include "tests/kernels/cpu_device_with_image_kernels.hpp"
#include "tests/workloads/first_gradients.hpp"
#include "tests/workloads/float_gradient_yardstick.hpp"
#include "worker/device_dataset.hpp"
#include "worker/training_loop.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::testing {

constexpr std::uint64_t three_steps_seed = 5;
constexpr int three_steps = 3;

// One rank alone: train() sums nothing for it, so this stands in for MPI.
class OneRankCommunicator final : public comm::AllreduceOnlyCommunicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(std::span<float>) override {}
  void start_allreduce_sum(std::span<float>, const kernels::DeviceEvent&) override {}
  void wait_all() override {}
  double last_exchange_seconds() override { return 0; }
  bool can_be_captured() const override { return true; }
};

struct ThreeSteps {
  std::vector<float> parameters;
  std::vector<double> loss;  // per step
};

// The two distinct batches the three steps cycle through (steps 1 and 2 replay the graph of a
// different batch than step 0 ran), each input value moved by `ulps` where that is not 0.
inline std::vector<workloads::HostBatch> three_step_batches(const std::string& model, int batch,
                                                            int ulps = 0,
                                                            std::uint64_t ulp_seed = 0) {
  const auto workload = workloads::make_workload(model);
  std::vector<workloads::HostBatch> batches;
  for (int index = 0; index < 2; ++index) {
    batches.push_back(workload->make_batch(batch, three_steps_seed, 0, index));
    if (ulps > 0) move_by_ulps(batches.back().inputs, ulps, ulp_seed, std::uint64_t(index));
  }
  return batches;
}

// Three steps of SGD (learning rate 0.01, momentum 0.9) from the seed's weights, through the
// training loop, so a device that captures steps replays them; unless `capture` is false: then a
// learning-rate warm-up over all three steps from the rate itself (so the same rate, bit for bit)
// keeps every step eager, as the loop captures none while the rate may still change.
inline ThreeSteps train_three_steps(kernels::Device& device, const std::string& model, int batch,
                                    const std::vector<workloads::HostBatch>& batches,
                                    bool capture = true) {
  const auto workload = workloads::make_workload(model);
  OneRankCommunicator alone;
  const worker::DeviceDataset data(device, batch, batches);
  auto network = workload->build_network(device, batch);
  network->initialize(three_steps_seed);
  model::SgdMomentum<float> optimizer(device, network->parameters().size(), 0.01f, 0.9f);
  worker::TrainingSchedule schedule{0, three_steps};
  if (!capture) {
    schedule.learning_rate_start = optimizer.learning_rate();
    schedule.learning_rate_warmup = three_steps;
  }
  const worker::RankMeasurements measured =
      worker::train(*network, optimizer, data, alone,
                    worker::make_gradient_exchange(*network, 0, true), device, schedule);
  ThreeSteps result{std::vector<float>(network->parameters().size()), measured.loss};
  device.copy_to_host(result.parameters.data(), network->parameters().data(),
                      result.parameters.size() * sizeof(float));
  return result;
}

inline ThreeSteps train_three_steps(kernels::Device& device, const std::string& model, int batch) {
  return train_three_steps(device, model, batch, three_step_batches(model, batch));
}

// The largest |a - b| over the parameters, and where.
struct ParameterDifference {
  double largest = 0;
  std::size_t index = 0;
};

inline ParameterDifference largest_parameter_difference(const std::vector<float>& a,
                                                        const std::vector<float>& b) {
  ParameterDifference difference;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (const double d = std::abs(double(a[i]) - b[i]); d > difference.largest) difference = {d, i};
  return difference;
}

// The largest distance a parameter moved from its initial value in `trained`.
inline double largest_parameter_update(const std::string& model,
                                       const std::vector<float>& trained) {
  kernels::CpuDevice device(1);
  auto network = workloads::make_workload(model)->build_network(device, 1);
  network->initialize(three_steps_seed);
  return largest_parameter_difference(
             std::vector<float>(network->parameters().begin(), network->parameters().end()),
             trained)
      .largest;
}

struct ThreeStepSpread {
  ThreeSteps cpu;  // the CPU device's own run, in its native layout
  double largest_update = 0;
  // Each rounding variant's largest parameter difference from `cpu`, in the table's order.
  std::vector<double> parameter_differences;
  // The largest difference of any rounding variant from `cpu`: in a parameter, and in each step's
  // loss.
  double parameter_spread = 0;
  std::array<double, three_steps> loss_spread{};
  std::string table;  // one line per variant, for the log
};

// The variants: the plain NCHW layout, and inputs moved by 1, 2 and 4 ulps with four seeds each.
// Where the network amplifies rounding, which parameters a perturbation flips, and how far, is
// itself chaotic (a 4-ulp move hardly moves the first gradients further than a 1-ulp move: both
// flip the same few choices), so the variants are samples of one distribution, the spread is
// the largest of thirteen, and a device is allowed a few spreads (the tail beyond a sample's
// largest). Made once per model and batch in a test program.
inline const ThreeStepSpread& three_step_spread(const std::string& model, int batch) {
  static std::map<std::pair<std::string, int>, ThreeStepSpread> made;
  if (const auto found = made.find({model, batch}); found != made.end()) return found->second;
  kernels::CpuDevice native(1);
  ThreeStepSpread spread;
  spread.cpu = train_three_steps(native, model, batch);
  spread.largest_update = largest_parameter_update(model, spread.cpu.parameters);
  spread.table = fmt::format(
      "{} batch {}: largest update {:.4g}, losses {:.5f} {:.5f} {:.5f}\n"
      "  variant            parameter (share of the update)   loss differences by step\n",
      model, batch, spread.largest_update, spread.cpu.loss[0], spread.cpu.loss[1],
      spread.cpu.loss[2]);
  const auto add = [&](const std::string& name, const ThreeSteps& variant) {
    const ParameterDifference difference =
        largest_parameter_difference(spread.cpu.parameters, variant.parameters);
    spread.parameter_differences.push_back(difference.largest);
    spread.parameter_spread = std::max(spread.parameter_spread, difference.largest);
    spread.table += fmt::format("  {:18} {:10.4g} ({:5.3f})", name, difference.largest,
                                difference.largest / spread.largest_update);
    for (int step = 0; step < three_steps; ++step) {
      const double loss_difference = variant.loss[step] - spread.cpu.loss[step];
      spread.loss_spread[step] = std::max(spread.loss_spread[step], std::abs(loss_difference));
      spread.table += fmt::format(" {:10.3g}", loss_difference);
    }
    spread.table += "\n";
  };
  PlainLayoutCpu plain;
  add("plain NCHW", train_three_steps(plain, model, batch, three_step_batches(model, batch)));
  for (int ulps : {1, 2, 4})
    for (std::uint64_t seed : {11, 12, 13, 14})
      add(fmt::format("{} ulp, seed {}", ulps, seed),
          train_three_steps(native, model, batch, three_step_batches(model, batch, ulps, seed)));
  spread.table +=
      fmt::format("  spread             {:10.4g} ({:5.3f}) {:10.3g} {:10.3g} {:10.3g}\n",
                  spread.parameter_spread, spread.parameter_spread / spread.largest_update,
                  spread.loss_spread[0], spread.loss_spread[1], spread.loss_spread[2]);
  return made.emplace(std::pair{model, batch}, std::move(spread)).first->second;
}

// What a device's three steps are held to where the network amplifies rounding: the CPU's run
// within spreads_allowed spreads (as its first gradients are held to the exact run), and each
// loss never more tightly than the other networks' 1e-3 of (1 + loss).
inline double allowed_parameter_difference(const ThreeStepSpread& spread) {
  return spreads_allowed * spread.parameter_spread;
}
inline double allowed_loss_difference(const ThreeStepSpread& spread, int step) {
  return std::max(1e-3 * (1 + spread.cpu.loss[step]), spreads_allowed * spread.loss_spread[step]);
}

}  // namespace dlscale::testing
