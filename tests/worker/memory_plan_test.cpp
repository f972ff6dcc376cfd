// The memory estimate matches what a network really allocates, and runs that cannot fit are
// refused with the estimate next to what is available.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "worker/memory_plan.hpp"
#include "workloads/fcn_workload.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::worker {
namespace {

TEST(MemoryPlan, NetworkEstimateEqualsWhatItAllocates) {
  kernels::CpuDevice device(1);
  const auto workload = workloads::parse_fcn_spec("30,20,10,5");
  const auto network = workload->build_network(device, 16);
  EXPECT_EQ(workload->network_device_bytes(16), network->allocated_bytes());
}

TEST(MemoryPlan, CnnAndLstmEstimatesEqualWhatTheyAllocate) {
  kernels::CpuDevice device(1);
  for (const char* name : {"alexnet-r", "resnet-56", "lstm:6,8,2,20"}) {  // resnet: blocks' buffers
    const auto workload = workloads::make_workload(name);
    const auto network = workload->build_network(device, 8);
    EXPECT_EQ(workload->network_device_bytes(8), network->allocated_bytes()) << name;
  }
}

TEST(MemoryPlan, EstimateGrowsWithTheBatch) {
  const auto workload = workloads::make_workload("fcn-r");
  EXPECT_LT(estimate_training_bytes(*workload, 64, 8), estimate_training_bytes(*workload, 1024, 8));
  // At least weights, gradients and velocity.
  EXPECT_GE(estimate_training_bytes(*workload, 1, 1), 3 * workload->parameter_count() * 4);
}

TEST(MemoryPlan, RunThatCannotFitIsRefusedWithTheEstimate) {
  const auto workload = workloads::make_workload("fcn-s");
  const std::uint64_t eight_gib = 8ULL << 30;
  try {
    check_memory_fits(*workload, 100000, 8, 4, eight_gib, "a test CPU");
    FAIL() << "a 100000-sample fcn-s batch fitted in 8 GiB";
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("--batch 100000"), std::string::npos) << message;
    EXPECT_NE(message.find("8.0 GiB is available"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(check_memory_fits(*workload, 64, 8, 1, eight_gib, "a test CPU"));
}

TEST(HostInfo, ReportsMemory) {
  EXPECT_GT(available_memory_bytes(), 0u);
  EXPECT_GT(peak_resident_bytes(), 0u);
}

}  // namespace
}  // namespace dlscale::worker
