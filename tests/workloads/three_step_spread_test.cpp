// What float rounding alone does to three SGD steps on the CPU
// (tests/workloads/three_step_spread.hpp): resnet-56 (batch 4) and mobilenet-v2 (batch 2) end
// three steps a tenth to two thirds of their largest update apart when only rounding differs,
// while alexnet-r and the fcn typically agree to 3e-6 of theirs. This settles the H200's
// resnet-56 and mobilenet-v2 parameters after three steps (issue 30: 0.35 and 0.6 of the update
// from the CPU's) as rounding, and shows that the bound the GPU is held to there still catches a
// replayed step that reads the wrong batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_device.hpp"
#include "tests/workloads/three_step_spread.hpp"

namespace dlscale::testing {
namespace {

struct Case {
  std::string model;
  int batch;
  bool amplifies_rounding;  // as tests/worker/gpu_training_test.cpp holds each
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.model << " batch " << c.batch; }

class ThreeStepRoundingSpread : public ::testing::TestWithParam<Case> {};

TEST_P(ThreeStepRoundingSpread, IsLargeOnlyWhereTheNetworkAmplifiesRounding) {
  const auto& [model, batch, amplifies_rounding] = GetParam();
  const ThreeStepSpread& spread = three_step_spread(model, batch);
  std::cout << spread.table;
  std::vector<double> shares_of_update;
  for (double difference : spread.parameter_differences)
    shares_of_update.push_back(difference / spread.largest_update);
  std::sort(shares_of_update.begin(), shares_of_update.end());
  if (amplifies_rounding) {
    // Every variant ends far from the CPU's run. Measured: 0.11 to 0.34 (resnet-56) and 0.44 to
    // 0.61 (mobilenet-v2) of the largest update; losses of the third step up to 0.30 and 0.24
    // apart.
    EXPECT_GT(shares_of_update.front(), 0.05) << model;
    EXPECT_GT(spread.loss_spread[2], 0.02) << model;
  } else {
    // The typical variant agrees to 3e-6 of the update. Not every one: at alexnet-r batch 8, a
    // 1-ulp move (seed 13) flips a near-tie of a max pool, which routes the gradient elsewhere
    // (2% to 5% of each convolution's largest gradient, the dense layer unchanged), and a
    // parameter ends 0.15 of the update away: the strict bound of the GPU test holds only while
    // the GPU's rounding flips no such tie.
    EXPECT_LT(shares_of_update[shares_of_update.size() / 2], 1e-5) << model;
  }
}

// A replayed step that read the first batch again (a graph bound to the wrong buffers) changes
// the second step's loss by 0.67 (resnet-56) and 0.89 (mobilenet-v2): far beyond what rounding
// does to it, so the GPU's loss bound there still catches it.
TEST_P(ThreeStepRoundingSpread, ReplayingTheFirstBatchIsBeyondTheSpread) {
  const auto& [model, batch, amplifies_rounding] = GetParam();
  const ThreeStepSpread& spread = three_step_spread(model, batch);
  auto batches = three_step_batches(model, batch);
  batches[1] = batches[0];
  kernels::CpuDevice native(1);
  const ThreeSteps wrong = train_three_steps(native, model, batch, batches);
  EXPECT_GT(std::abs(wrong.loss[1] - spread.cpu.loss[1]), allowed_loss_difference(spread, 1))
      << model;
}

std::string test_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name;
  for (char c : info.param.model) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name + "_batch_" + std::to_string(info.param.batch);
}

// The GPU training test's cases, less the LSTM: its inputs are token ids, which an ulp move
// would change into other tokens.
INSTANTIATE_TEST_SUITE_P(Workloads, ThreeStepRoundingSpread,
                         ::testing::Values(Case{"fcn:64,48,32,10", 16, false},
                                           Case{"alexnet-r", 8, false}, Case{"resnet-56", 4, true},
                                           Case{"mobilenet-v2", 2, true}),
                         test_name);

}  // namespace
}  // namespace dlscale::testing
