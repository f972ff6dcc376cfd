// A network computes the same function whatever activation layout its device keeps: the CPU's
// oneDNN blocked layout (nChw8c or nChw16c, by the CPU) and plain NCHW give the same first-step
// gradients for the CNNs. This is what makes a CPU run and a GPU run (NCHW) comparable value
// by value.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_device.hpp"
#include "tests/kernels/cpu_device_with_image_kernels.hpp"
#include "tests/workloads/first_gradients.hpp"
#include "worker/device_dataset.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::kernels {
namespace {

using testing::PlainLayoutCpu;

class LayoutIndependence : public ::testing::TestWithParam<std::pair<std::string, int>> {};

TEST_P(LayoutIndependence, NativeAndPlainLayoutsGiveTheSameGradients) {
  const auto& [model, batch] = GetParam();
  CpuDevice native(1);
  PlainLayoutCpu plain;
  const auto in_native = testing::first_gradients(native, model, batch);
  const auto in_plain = testing::first_gradients(plain, model, batch);
  ASSERT_EQ(in_native.values.size(), in_plain.values.size());
  const std::string differing =
      testing::layers_that_differ(in_plain.values, in_native.values, in_plain.layers, 1e-4);
  EXPECT_TRUE(differing.empty()) << model << ": native and NCHW gradients differ" << differing;
}

std::string test_name(const ::testing::TestParamInfo<std::pair<std::string, int>>& info) {
  std::string name;
  for (char c : info.param.first) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cnns, LayoutIndependence,
                         ::testing::Values(std::pair<std::string, int>{"alexnet-r", 4}), test_name);

// resnet-56 is left out: at batch 4 its first-step gradients move by up to 1.6e-2 of a layer's
// largest when the input images move by one float ulp, so no two float layouts can agree to
// 1e-4. tests/workloads/float_gradient_conditioning_test.cpp holds both layouts (and the GPU)
// to the exact image kernels within that reach instead.

}  // namespace
}  // namespace dlscale::kernels
