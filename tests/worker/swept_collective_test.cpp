// The collectives `dlscale comm` sweeps, each against its specification on simulated ranks: the
// table's rows follow nccl-tests' size convention, the bus factors are nccl-tests', a correct
// result has no wrong element and a corrupted or misrouted one is caught, and in place the input
// and output lie where NCCL puts them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "core/errors.hpp"
#include "results/schema.hpp"
#include "worker/exact_sum_pattern.hpp"
#include "worker/swept_collectives/swept_collective.hpp"

namespace dlscale::worker {
namespace {

constexpr auto fp32 = comm::GradientDtype::fp32;
constexpr auto bf16 = comm::GradientDtype::bf16;

TEST(SweptCollectives, AreNamedAsTheyAreSelectedAndStored) {
  std::vector<std::string> names;
  for (const SweptCollective* collective : swept_collectives()) names.push_back(collective->name);
  EXPECT_EQ(names, (std::vector<std::string>{"allreduce", "reduce_scatter", "all_gather",
                                             "broadcast", "alltoall"}));
  EXPECT_EQ(&find_swept_collective("alltoall"), &swept_collective(Collective::alltoall));
  EXPECT_THROW(find_swept_collective("gather"), UserError);
  // The names `dlscale predict` looks for in a results file.
  EXPECT_STREQ(swept_allreduce.name, results::schema::comm_file::allreduce_collective);
  EXPECT_STREQ(comm::comm_dtype_names(fp32), results::schema::comm_file::float_dtype);
}

TEST(SweptCollectives, BusFactorsAreNcclTests) {
  // nccl-tests' doc/PERFORMANCE.md, at n = 4.
  const std::map<Collective, double> factors = {{Collective::allreduce, 1.5},
                                                {Collective::reduce_scatter, 0.75},
                                                {Collective::all_gather, 0.75},
                                                {Collective::broadcast, 1.0},
                                                {Collective::alltoall, 0.75}};
  for (const auto& [collective, factor] : factors)
    EXPECT_DOUBLE_EQ(swept_collective(collective).bus_factor(4), factor)
        << swept_collective(collective).name;
  EXPECT_DOUBLE_EQ(swept_allreduce.latency_steps(4), 6);
  EXPECT_DOUBLE_EQ(swept_reduce_scatter.latency_steps(4), 3);
}

TEST(TableElementCounts, RoundDownToWholeElementsOfTheDtype) {
  const std::vector<std::uint64_t> sizes = {10, 16, 22, 28, 34, 40};
  EXPECT_EQ(table_element_counts(swept_allreduce, sizes, 4, 4),
            (std::vector<std::uint64_t>{2, 4, 5, 7, 8, 10}));
  EXPECT_EQ(table_element_counts(swept_allreduce, sizes, 2, 4),
            (std::vector<std::uint64_t>{5, 8, 11, 14, 17, 20}));
}

TEST(TableElementCounts, SplittingCollectivesRoundToWholeElementsPerRankAndDropEmptyRows) {
  // 8 bytes are 2 floats: no whole float per rank on 4 ranks. 16 and 20 bytes both give 4.
  const std::vector<std::uint64_t> sizes = {8, 16, 20, 40};
  for (const SweptCollective* collective :
       {&swept_reduce_scatter, &swept_all_gather, &swept_alltoall})
    EXPECT_EQ(table_element_counts(*collective, sizes, 4, 4), (std::vector<std::uint64_t>{4, 8}))
        << collective->name;
  EXPECT_EQ(table_element_counts(swept_broadcast, sizes, 4, 4),
            (std::vector<std::uint64_t>{2, 4, 5, 10}));
}

// One call of `collective` on `ranks` simulated ranks, by its definition: each rank's output from
// every rank's input (filled as the sweep fills it).
std::vector<std::vector<float>> simulate(const SweptCollective& collective, std::uint64_t count,
                                         int ranks, std::uint64_t call, comm::GradientDtype dtype) {
  std::vector<std::vector<float>> inputs, outputs;
  for (int r = 0; r < ranks; ++r) {
    const CallLayout layout = collective.layout(count, ranks, r);
    inputs.emplace_back(layout.input_count);
    collective.fill_input(inputs.back(), r, ranks, call, dtype);
    outputs.emplace_back(layout.output_count, 0.0f);
  }
  const std::uint64_t piece = count / std::uint64_t(ranks);
  for (int r = 0; r < ranks; ++r)
    for (std::uint64_t i = 0; i < outputs[r].size(); ++i) {
      float& out = outputs[r][i];
      switch (collective.collective) {
        case Collective::allreduce:
          for (int s = 0; s < ranks; ++s) out += inputs[s][i];
          break;
        case Collective::reduce_scatter:
          for (int s = 0; s < ranks; ++s) out += inputs[s][std::uint64_t(r) * piece + i];
          break;
        case Collective::all_gather:
          out = inputs[i / piece][i % piece];
          break;
        case Collective::broadcast:
          out = inputs[collective.root][i];
          break;
        case Collective::alltoall:
          out = inputs[i / piece][std::uint64_t(r) * piece + i % piece];
          break;
      }
    }
  return outputs;
}

TEST(SweptCollectives, ACorrectResultHasNoWrongElementAndEveryFaultIsCaught) {
  for (const SweptCollective* collective : swept_collectives())
    for (const comm::GradientDtype dtype : {fp32, bf16})
      for (const int ranks : {1, 3, 4}) {
        SCOPED_TRACE(testing::Message()
                     << collective->name << " in " << comm::comm_dtype_names(dtype) << " on "
                     << ranks << " ranks");
        const std::uint64_t count = collective->row_count(4000, ranks);
        auto outputs = simulate(*collective, count, ranks, 7, dtype);
        for (int r = 0; r < ranks; ++r)
          EXPECT_EQ(collective->count_wrong(outputs[r], r, ranks, 7, dtype), 0u) << "rank " << r;
        // One element off, and the whole result of the previous call.
        auto& last = outputs[std::size_t(ranks - 1)];
        last[last.size() / 2] += 1;
        EXPECT_EQ(collective->count_wrong(last, ranks - 1, ranks, 7, dtype), 1u);
        const auto previous = simulate(*collective, count, ranks, 6, dtype);
        EXPECT_GT(collective->count_wrong(previous[0], 0, ranks, 7, dtype),
                  previous[0].size() * 3 / 4);
      }
}

TEST(SweptCollectives, ABlockFromTheWrongRankIsCaught) {
  // Rank 1's all-gathered and alltoall buffers with ranks 0's and 2's blocks swapped.
  for (const SweptCollective* collective : {&swept_all_gather, &swept_alltoall}) {
    SCOPED_TRACE(collective->name);
    auto outputs = simulate(*collective, 3 * 100, 3, 2, fp32);
    std::swap_ranges(outputs[1].begin(), outputs[1].begin() + 100, outputs[1].begin() + 200);
    EXPECT_EQ(collective->count_wrong(outputs[1], 1, 3, 2, fp32), 200u);
  }
}

TEST(SweptCollectives, InPlaceBuffersLieWhereNcclPutsThem) {
  // Reduce-scatter: the shard is received into this rank's own shard of the buffer it gives.
  const CallLayout scatter = swept_reduce_scatter.layout(400, 4, 2);
  EXPECT_EQ(scatter.input_count, 400u);
  EXPECT_EQ(scatter.output_count, 100u);
  EXPECT_EQ(scatter.in_place_output_offset, 200u);
  // All-gather: the shard given is this rank's own shard of the buffer received.
  const CallLayout gather = swept_all_gather.layout(400, 4, 3);
  EXPECT_EQ(gather.input_count, 100u);
  EXPECT_EQ(gather.in_place_input_offset, 300u);
  EXPECT_EQ(gather.in_place_output_offset, 0u);
  for (const SweptCollective* same_buffer : {&swept_allreduce, &swept_broadcast, &swept_alltoall}) {
    const CallLayout layout = same_buffer->layout(400, 4, 1);
    EXPECT_EQ(layout.input_count, layout.output_count) << same_buffer->name;
    EXPECT_EQ(layout.in_place_input_offset, layout.in_place_output_offset) << same_buffer->name;
  }
}

}  // namespace
}  // namespace dlscale::worker
