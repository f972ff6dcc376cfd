// The correctness check of `dlscale comm`: the contributions of any number of ranks sum exactly
// to what the checker expects, in float32 and in bf16 (summed as the bf16 backends sum), and a
// corrupted, stale or incomplete result is caught, both by the checker itself and by the sweep
// running over a communicator that corrupts what it returns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "comm/bf16_sum.hpp"
#include "comm/gradient_communicator.hpp"
#include "comm/host_group.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "tests/comm/allreduce_only_communicator.hpp"
#include "worker/collective_sweep.hpp"
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
  const int most = exact_sum_max_ranks(comm::GradientDtype::fp32);
  for (int ranks : {1, 2, 3, 7, 64, most})
    for (std::uint64_t call : {0ull, 1ull, 12345ull})
      EXPECT_EQ(count_wrong_elements(reduced_by_hand(1000, ranks, call), ranks, call), 0u)
          << ranks << " ranks, call " << call;
  EXPECT_GE(most, 5000) << "float32 sums stay exact on thousands of ranks";
}

// What a bf16 sum over `ranks` ranks returns: each rank's contribution rounded to bf16, the
// partial sums taken in float and rounded back (comm/bf16_sum.hpp), in the given rank order.
std::vector<float> bf16_sum_by_hand(std::size_t count, const std::vector<int>& order,
                                    std::uint64_t call, std::uint64_t first_index) {
  std::vector<float> sum(count), contribution(count);
  std::vector<std::uint16_t> rounded(count, comm::to_bf16(0.0f));
  for (const int r : order) {
    fill_contribution(contribution, r, call, comm::GradientDtype::bf16, first_index);
    for (std::size_t i = 0; i < count; ++i)
      rounded[i] = comm::add_bf16(rounded[i], comm::to_bf16(contribution[i]));
  }
  for (std::size_t i = 0; i < count; ++i) sum[i] = comm::from_bf16(rounded[i]);
  return sum;
}

TEST(ExactSumPattern, Bf16SumsAreExactUpToTheirRankLimitInAnyOrder) {
  const int most = exact_sum_max_ranks(comm::GradientDtype::bf16);
  EXPECT_GE(most, 32) << "bf16 sums stay exact on a few dozen ranks";
  for (const int ranks : {1, 2, 4, 7, most}) {
    std::vector<int> forward, backward;
    for (int r = 0; r < ranks; ++r) forward.push_back(r);
    backward.assign(forward.rbegin(), forward.rend());
    for (const auto& order : {forward, backward})
      for (const std::uint64_t call : {0ull, 5ull, 12345ull})
        EXPECT_EQ(count_wrong_elements(bf16_sum_by_hand(997, order, call, 3), ranks, call,
                                       comm::GradientDtype::bf16, 3),
                  0u)
            << ranks << " ranks, call " << call;
  }
}

TEST(ExactSumPattern, TheBf16RankLimitIsWhereTheLargestSumPasses256) {
  const auto largest_sum = [](int ranks) {
    float largest = 0;
    for (std::uint64_t index = 0; index < 100; ++index)
      largest = std::max(largest, exact_sum(comm::GradientDtype::bf16, ranks, index, 0));
    return largest;
  };
  const int most = exact_sum_max_ranks(comm::GradientDtype::bf16);
  EXPECT_LE(largest_sum(most), 256.0f);
  EXPECT_GT(largest_sum(most + 1), 256.0f);
  // Far past it, bf16 sums round: the check would count them wrong.
  std::vector<int> order;
  for (int r = 0; r < 2 * most; ++r) order.push_back(r);
  EXPECT_GT(count_wrong_elements(bf16_sum_by_hand(1000, order, 0, 0), 2 * most, 0,
                                 comm::GradientDtype::bf16),
            0u);
}

TEST(ExactSumPattern, Bf16ContributionsAreBf16Values) {
  for (int rank = 0; rank < 40; ++rank)
    for (std::uint64_t index = 0; index < 100; ++index) {
      const float value = contribution(comm::GradientDtype::bf16, rank, index, 7);
      EXPECT_EQ(comm::from_bf16(comm::to_bf16(value)), value);
    }
}

TEST(ExactSumPattern, TheFirstIndexShiftsThePattern) {
  std::vector<float> whole(100), tail(60);
  fill_contribution(whole, 3, 2);
  fill_contribution(tail, 3, 2, comm::GradientDtype::fp32, 40);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), whole.begin() + 40));
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
  for (const auto dtype : {comm::GradientDtype::fp32, comm::GradientDtype::bf16}) {
    const auto measurements =
        measure_collective_sweep(swept_allreduce, faithful, group, device, dtype, counts, {2, 3});
    for (const auto* placement : {&measurements.out_of_place, &measurements.in_place}) {
      EXPECT_EQ(placement->wrong_elements, (std::vector<std::uint64_t>{0, 0, 0}));
      EXPECT_EQ(placement->seconds.size(), counts.size() * 3) << "sizes x measured calls";
    }
  }
}

TEST(AllreduceSweep, ACorruptingBackendIsCaughtInEveryCallWarmUpIncluded) {
  CorruptingCommunicator corrupting(2);
  const std::vector<std::uint64_t> counts = {1, 8, 1000};
  kernels::CpuDevice device(1);
  SingleRankGroup group;
  const auto measurements = measure_collective_sweep(swept_allreduce, corrupting, group, device,
                                                     comm::GradientDtype::fp32, counts, {2, 3});
  // 5 calls per size and placement, min(2, count) wrong elements in each.
  EXPECT_EQ(measurements.out_of_place.wrong_elements, (std::vector<std::uint64_t>{5, 10, 10}));
  EXPECT_EQ(measurements.in_place.wrong_elements, (std::vector<std::uint64_t>{5, 10, 10}));
}

}  // namespace
}  // namespace dlscale::worker
