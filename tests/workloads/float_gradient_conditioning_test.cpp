// A float device's first-step gradients against the exact image kernels, within what float
// rounding alone does to the network (tests/workloads/float_gradient_yardstick.hpp): oneDNN in
// its blocked layout and in plain NCHW, for a well-conditioned CNN (alexnet-r) and an
// ill-conditioned one (resnet-56 at batch 4, whose gradients a one-ulp move of the input images
// changes by up to 1.6e-2 of a layer's largest). This settles why two float devices' resnet-56
// gradients differ by percents (issue 30): the network amplifies rounding that much; a kernel
// wrong by more than rounding would show beyond it. The GPU is held to the same yardstick in
// tests/worker/gpu_training_test.cpp.
#include <gtest/gtest.h>

#include <iostream>
#include <ostream>
#include <string>

#include "kernels/cpu/cpu_device.hpp"
#include "tests/workloads/float_gradient_yardstick.hpp"

namespace dlscale::testing {
namespace {

struct Case {
  std::string model;
  int batch;
  bool amplifies_rounding;  // the yardstick's own finding, held so that it cannot drift unseen
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.model << " batch " << c.batch; }

class FloatGradientConditioning : public ::testing::TestWithParam<Case> {};

TEST_P(FloatGradientConditioning, CpuGradientsAreWithinRoundingOfTheExactKernels) {
  const auto& [model, batch, amplifies_rounding] = GetParam();
  const FloatGradientYardstick& yardstick = float_gradient_yardstick(model, batch);
  // alexnet-r is well-conditioned (the devices must then agree to a few ulps); resnet-56 and
  // mobilenet-v2 at these batches are not (exact agreement between float devices is impossible).
  if (amplifies_rounding)
    EXPECT_GT(yardstick.largest_spread, ill_conditioned) << model;
  else
    EXPECT_LT(yardstick.largest_spread, 1e-5) << model;
  kernels::CpuDevice native(1);
  PlainLayoutCpu plain;
  std::string table = fmt::format("{} batch {}\n", model, batch);
  const std::string blocked_beyond =
      beyond_rounding(yardstick, first_gradients(native, model, batch), "oneDNN blocked", table);
  const std::string plain_beyond =
      beyond_rounding(yardstick, first_gradients(plain, model, batch), "oneDNN NCHW", table);
  std::cout << table;
  EXPECT_TRUE(blocked_beyond.empty()) << model << blocked_beyond;
  EXPECT_TRUE(plain_beyond.empty()) << model << plain_beyond;
}

std::string test_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name;
  for (char c : info.param.model) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name + "_batch_" + std::to_string(info.param.batch);
}

INSTANTIATE_TEST_SUITE_P(Cnns, FloatGradientConditioning,
                         ::testing::Values(Case{"alexnet-r", 4, false}, Case{"resnet-56", 4, true},
                                           Case{"mobilenet-v2", 2, true}),
                         test_name);

}  // namespace
}  // namespace dlscale::testing
