// The memory estimate matches what a network really allocates, and runs that cannot fit are
// refused with the estimate next to what is available.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "worker/device_dataset.hpp"
#include "worker/memory_plan.hpp"
#include "workloads/fcn_workload.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::worker {
namespace {

constexpr auto fp32 = kernels::Precision::fp32;

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

// Layer norms keep statistics per sample; attention one head's scores whatever the batch.
TEST(MemoryPlan, GptEstimateEqualsWhatItAllocates) {
  kernels::CpuDevice device(1);
  for (const char* name : {"gpt-tiny", "gpt:3,12,4,7,19"}) {
    const auto workload = workloads::make_workload(name);
    for (const int batch : {1, 8}) {
      const auto network = workload->build_network(device, batch);
      EXPECT_EQ(workload->network_device_bytes(batch), network->allocated_bytes())
          << name << " at batch " << batch;
    }
  }
}

// The update's share per rank: SGD keeps one float per parameter, AdamW two; sharded over n ranks
// each keeps its shard's state and a gradient and a parameter shard.
TEST(MemoryPlan, UpdateBytesFollowTheOptimizerAndTheSharding) {
  const std::uint64_t n = 1000;
  using results::OptimizerKind, results::Sharding;
  EXPECT_EQ(update_bytes(n, {OptimizerKind::sgd, Sharding::none, 4}), 4 * n);
  EXPECT_EQ(update_bytes(n, {OptimizerKind::adamw, Sharding::none, 4}), 8 * n);
  EXPECT_EQ(update_bytes(n, {OptimizerKind::adamw, Sharding::optimizer, 4}),
            4 * (2 * 250 + 2 * 250));
  EXPECT_EQ(update_bytes(n, {OptimizerKind::sgd, Sharding::gradients, 3}), 4 * (334 + 2 * 334));
  // One rank shards nothing.
  EXPECT_EQ(update_bytes(n, {OptimizerKind::adamw, Sharding::optimizer, 1}), 8 * n);
}

// Fully sharded, the network's whole weights and gradients give way to two units' parameters and
// gradients: fcn 30,20,10,5 has layers of 620, 210 and 55 parameters; units of at least 1 byte are
// one layer each (the largest, 620, pads to 620 over 4 ranks), one unit of everything is 885
// values, padded to 888.
TEST(MemoryPlan, FullyShardedHoldsItsShardsAndTwoUnitsWhole) {
  using results::OptimizerKind, results::Sharding;
  const auto workload = workloads::parse_fcn_spec("30,20,10,5");
  const UpdateStrategy per_layer{OptimizerKind::adamw, Sharding::full, 4, 1};
  const UpdateStrategy one_unit{OptimizerKind::adamw, Sharding::full, 4, 0};
  EXPECT_EQ(unit_buffer_bytes(*workload, per_layer), 4u * 620 * 4);
  EXPECT_EQ(unit_buffer_bytes(*workload, one_unit), 4u * 888 * 4);
  EXPECT_EQ(unit_buffer_bytes(*workload, {OptimizerKind::adamw, Sharding::optimizer, 4, 1}), 0u);
  EXPECT_EQ(unit_buffer_bytes(*workload, {OptimizerKind::adamw, Sharding::full, 1, 1}), 0u);
  const std::uint64_t replicated =
      estimate_training_bytes(*workload, 16, 1, fp32, {OptimizerKind::adamw, Sharding::none, 4});
  EXPECT_EQ(estimate_training_bytes(*workload, 16, 1, fp32, per_layer),
            replicated - 2 * 885 * 4 - 2 * 885 * 4 + update_bytes(885, per_layer) + 4 * 620 * 4);
}

// A refusal names the least sharding that would fit: the optimizer's state, else everything.
TEST(MemoryPlan, RefusalNamesTheShardingThatWouldFit) {
  using results::OptimizerKind, results::Sharding;
  const auto workload = workloads::parse_fcn_spec("4096,4096,4096,4096,10");
  const UpdateStrategy replicated{OptimizerKind::adamw, Sharding::none, 4, 1 << 20};
  UpdateStrategy optimizer = replicated, full = replicated;
  optimizer.sharding = Sharding::optimizer;
  full.sharding = Sharding::full;
  const auto per_rank = [&](const UpdateStrategy& strategy) {
    return double(estimate_training_bytes(*workload, 8, 1, fp32, strategy));
  };
  ASSERT_LT(per_rank(full), per_rank(optimizer));
  const auto refusal = [&](double available) {
    try {
      check_memory_fits(*workload, 8, 1, fp32, 4, std::uint64_t(available), "a test CPU",
                        replicated);
    } catch (const UserError& error) {
      return std::string(error.what());
    }
    return std::string("fits");
  };
  // Room for 4 ranks of each, by the 90% the check leaves usable.
  const std::string only_full = refusal(4 * per_rank(full) / 0.9 * 1.001);
  EXPECT_NE(only_full.find("--sharding full"), std::string::npos) << only_full;
  const std::string optimizer_too = refusal(4 * per_rank(optimizer) / 0.9 * 1.001);
  EXPECT_NE(optimizer_too.find("--sharding optimizer"), std::string::npos) << optimizer_too;
  const std::string neither = refusal(4 * per_rank(full) / 0.9 * 0.5);
  EXPECT_EQ(neither.find("--sharding"), std::string::npos) << neither;
}

TEST(MemoryPlan, EstimateGrowsWithTheBatch) {
  const auto workload = workloads::make_workload("fcn-r");
  EXPECT_LT(estimate_training_bytes(*workload, 64, 8, fp32),
            estimate_training_bytes(*workload, 1024, 8, fp32));
  // At least weights, gradients and velocity.
  EXPECT_GE(estimate_training_bytes(*workload, 1, 1, fp32), 3 * workload->parameter_count() * 4);
}

TEST(MemoryPlan, RunThatCannotFitIsRefusedWithTheEstimate) {
  const auto workload = workloads::make_workload("fcn-s");
  const std::uint64_t eight_gib = 8ULL << 30;
  try {
    check_memory_fits(*workload, 100000, 8, fp32, 4, eight_gib, "a test CPU");
    FAIL() << "a 100000-sample fcn-s batch fitted in 8 GiB";
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("--batch 100000"), std::string::npos) << message;
    EXPECT_NE(message.find("8.0 GiB is available"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(check_memory_fits(*workload, 64, 8, fp32, 1, eight_gib, "a test CPU"));
}

// Under bf16 the GEMM and convolution kernels keep bf16 copies of their operands beside the
// network's float buffers. The estimate counts them as a bound: one bf16 step of a wide FCN grows
// the process by more than the float network, by no more than the network and the bound, and by
// at least half the bound beyond the network (the copies are real, and the bound not loose).
TEST(MemoryPlan, Bf16EstimateBoundsTheCopiesAStepMakes) {
  constexpr int batch = 256;
  const auto workload = workloads::parse_fcn_spec("4096,2048,2048,10");
  const double network = double(workload->network_device_bytes(batch));
  const double copies = double(workload->bf16_copy_bytes(batch));
  EXPECT_EQ(estimate_training_bytes(*workload, batch, 1, kernels::Precision::bf16) -
                estimate_training_bytes(*workload, batch, 1, fp32),
            workload->bf16_copy_bytes(batch));
  const double before = double(peak_resident_bytes());
  {
    kernels::CpuDevice device(1, kernels::Precision::bf16);
    const worker::DeviceDataset data(device, *workload, batch, 1, 7, 0);
    auto network_on_device = workload->build_network(device, batch);
    network_on_device->initialize(7);
    network_on_device->forward_loss(batch, data.inputs(0), data.labels(0));
    network_on_device->backward(batch, data.inputs(0));
  }
  const double data_bytes = double(batch) * (4096 * sizeof(float) + sizeof(std::int32_t));
  const double grown = double(peak_resident_bytes()) - before - data_bytes;
  std::printf("network %.1f MB, bf16 copies at most %.1f MB; one bf16 step grew %.1f MB\n",
              network / 1e6, copies / 1e6, grown / 1e6);
  EXPECT_LE(grown, 1.05 * (network + copies));
  EXPECT_GE(grown - network, 0.5 * copies);
}

TEST(HostInfo, ReportsMemory) {
  EXPECT_GT(available_memory_bytes(), 0u);
  EXPECT_GT(peak_resident_bytes(), 0u);
}

}  // namespace
}  // namespace dlscale::worker
