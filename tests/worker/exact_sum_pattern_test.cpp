// The correctness check of `dlscale comm`: the contributions of any number of ranks sum exactly
// to what the checker expects, and a corrupted, stale or incomplete result is caught, both by the
// checker itself and by the sweep running over a communicator that corrupts what it returns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "comm/gradient_communicator.hpp"
#include "comm/host_group.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "tests/comm/allreduce_only_communicator.hpp"
#include "worker/allreduce_sweep.hpp"
#include "worker/exact_sum_pattern.hpp"

namespace dlscale::worker {
namespace {

// What a correct allreduce over `ranks` ranks returns for call `call`: summed in rank order, as
// floats, like a real reduction.
std::vector<float> reduced_by_hand(std::size_t count, int ranks, std::uint64_t call) {
  std::vector<float> sum(count, 0.0f), contribution(count);
  for (int r = 0; r < ranks; ++r) {
    fill_contribution(contribution, r, call);
    for (std::size_t i = 0; i < count; ++i) sum[i] += contribution[i];
  }
  return sum;
}

TEST(ExactSumPattern, CorrectSumsHaveNoWrongElementsAtAnyRankCount) {
  for (int ranks : {1, 2, 3, 7, 64, exact_sum_max_ranks})
    for (std::uint64_t call : {0ull, 1ull, 12345ull})
      EXPECT_EQ(count_wrong_elements(reduced_by_hand(1000, ranks, call), ranks, call), 0u)
          << ranks << " ranks, call " << call;
}

TEST(ExactSumPattern, EveryCorruptedElementIsCounted) {
  auto reduced = reduced_by_hand(4096, 4, 9);
  reduced[0] += 1;
  reduced[1234] = -reduced[1234];
  reduced[4095] = std::nextafter(reduced[4095], 1e9f);  // the smallest change a float can make
  EXPECT_EQ(count_wrong_elements(reduced, 4, 9), 3u);
}

TEST(ExactSumPattern, AMissingRankIsCaught) {
  const auto three_of_four = reduced_by_hand(1000, 3, 5);
  EXPECT_EQ(count_wrong_elements(three_of_four, 4, 5), 1000u);
}

TEST(ExactSumPattern, AResultLeftFromThePreviousCallIsCaught) {
  const auto previous = reduced_by_hand(1000, 2, 6);
  EXPECT_EQ(count_wrong_elements(previous, 2, 7), 1000u);
}

TEST(ExactSumPattern, AnUnreducedBufferIsMostlyCaught) {
  std::vector<float> own(1000);
  fill_contribution(own, 1, 3);
  // Rank 1 of 2 holds base + 1; the sum is 2*base + 1: equal only where base = 0 (1 in 61).
  EXPECT_GT(count_wrong_elements(own, 2, 3), 950u);
}

// A one-rank communicator whose allreduce leaves the sum in place (correct for one rank) and then
// corrupts `corrupted_elements` elements of it, as a broken backend might.
class CorruptingCommunicator final : public comm::AllreduceOnlyCommunicator {
 public:
  explicit CorruptingCommunicator(std::size_t corrupted_elements)
      : corrupted_elements_(corrupted_elements) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(std::span<float> values) override {
    for (std::size_t i = 0; i < std::min(corrupted_elements_, values.size()); ++i)
      values[values.size() - 1 - i] += 0.5f;
  }
  // The sweep sums with blocking calls only.
  void start_allreduce_sum(std::span<float> values, const kernels::DeviceEvent&) override {
    allreduce_sum(values);
  }
  void wait_all() override {}
  double last_exchange_seconds() override { return 0; }
  bool can_be_captured() const override { return false; }

 private:
  std::size_t corrupted_elements_;
};

// One rank alone: its barrier returns at once and it gathers only its own values.
class SingleRankGroup final : public comm::HostGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  std::vector<double> gather_to_root(std::span<const double> values) override {
    return {values.begin(), values.end()};
  }
  std::vector<std::string> gather_strings_to_root(const std::string& value) override {
    return {value};
  }
  std::vector<unsigned long long> gather_to_root(unsigned long long value) override {
    return {value};
  }
};

TEST(AllreduceSweep, ACorrectBackendGivesNoWrongElements) {
  CorruptingCommunicator faithful(0);
  const std::vector<std::uint64_t> counts = {1, 2, 1000};
  kernels::CpuDevice device(1);
  SingleRankGroup group;
  const auto measurements = measure_allreduce_sweep(faithful, group, device, counts, {2, 3});
  EXPECT_EQ(measurements.wrong_elements, (std::vector<std::uint64_t>{0, 0, 0}));
  EXPECT_EQ(measurements.seconds.size(), counts.size() * 3) << "sizes x measured calls";
}

TEST(AllreduceSweep, ACorruptingBackendIsCaughtInEveryCallWarmUpIncluded) {
  CorruptingCommunicator corrupting(2);
  const std::vector<std::uint64_t> counts = {1, 8, 1000};
  kernels::CpuDevice device(1);
  SingleRankGroup group;
  const auto measurements = measure_allreduce_sweep(corrupting, group, device, counts, {2, 3});
  // 5 calls per size, min(2, count) wrong elements in each.
  EXPECT_EQ(measurements.wrong_elements, (std::vector<std::uint64_t>{5, 10, 10}));
}

}  // namespace
}  // namespace dlscale::worker
