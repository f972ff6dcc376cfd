// One collective as `dlscale comm` sweeps it: nccl-tests' `struct testColl` in dlscale's terms. A
// record says what the collective is called, what a table row's size counts, its bus-bandwidth
// factor, how a rank's buffers are laid out, what each rank sends and must receive (checked
// exactly), and the one GradientCommunicator call that runs it. The sweep's loop
// (worker/collective_sweep.cpp) and the coordinator know no collective by name: a new one is a
// file in this folder and its line in swept_collective_registry.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "comm/gradient_communicator.hpp"

namespace dlscale::worker {

enum class Collective { allreduce, reduce_scatter, all_gather, broadcast, alltoall };

// One rank's buffers for one call of a row of `count` elements. In place, input and output are
// parts of one buffer of max(input_count, output_count) elements, starting at the offsets.
struct CallLayout {
  std::uint64_t input_count = 0;
  std::uint64_t output_count = 0;
  std::uint64_t in_place_input_offset = 0;
  std::uint64_t in_place_output_offset = 0;
};

struct SweptCollective {
  Collective collective;
  const char* name;  // as --collective takes it and tables and results files show it
  // What a row's size counts (nccl-tests' convention), for --help and the table's header.
  const char* size_meaning;
  const char* bus_factor_formula;  // as text, e.g. "2(n-1)/n"
  bool sums;  // it adds the ranks' values, so the dtype bounds the ranks (exact_sum_max_ranks)
  int root;   // the rank whose data it spreads, or -1 for none
  // nccl-tests' bus bandwidth factor (its doc/PERFORMANCE.md): busbw = algbw * bus_factor(n).
  double (*bus_factor)(int ranks);
  // The latency terms of one call in the alpha-beta model that the factor goes with:
  // t(m) = latency_steps(n) * alpha + bus_factor(n) * m * beta (the ring, or a pipelined chain).
  double (*latency_steps)(int ranks);
  // The row count that a requested size of `elements` elements gives: the elements themselves,
  // or rounded down to a whole number per rank where the collective splits the buffer.
  std::uint64_t (*row_count)(std::uint64_t elements, int ranks);
  CallLayout (*layout)(std::uint64_t count, int ranks, int rank);
  // Fills this rank's input for call `call` (worker/exact_sum_pattern.hpp).
  void (*fill_input)(std::span<float> input, int rank, int ranks, std::uint64_t call,
                     comm::GradientDtype dtype);
  // The elements of this rank's output that differ from what call `call` must leave there.
  std::uint64_t (*count_wrong)(std::span<const float> output, int rank, int ranks,
                               std::uint64_t call, comm::GradientDtype dtype);
  // One blocking call; in place where input and output share memory (as CallLayout puts them).
  void (*run)(comm::GradientCommunicator& communicator, std::span<const float> input,
              std::span<float> output);
};

// The records, one per collective file of this folder.
extern const SweptCollective swept_allreduce, swept_reduce_scatter, swept_all_gather,
    swept_broadcast, swept_alltoall;

// Every collective, in the order help texts list them.
std::span<const SweptCollective* const> swept_collectives();
const SweptCollective& swept_collective(Collective collective);
// The record named `name` (--collective). Throws UserError naming the collectives unless it is
// one of them.
const SweptCollective& find_swept_collective(const std::string& name);

// A table's row counts: each of `sizes_bytes` in whole elements of `element_bytes`, then
// `collective`'s row count on `ranks` ranks; ascending, without rows of no elements or repeats.
std::vector<std::uint64_t> table_element_counts(const SweptCollective& collective,
                                                std::span<const std::uint64_t> sizes_bytes,
                                                std::size_t element_bytes, int ranks);

// What several collectives share, for their records.
// The ring's cost structure for the collectives that split a buffer into one piece per rank
// (reduce-scatter, all-gather, alltoall): n-1 steps, each rank sending (n-1)/n of the buffer.
double ring_steps(int ranks);
double ring_bus_factor(int ranks);
// A row count rounded down to whole pieces of `ranks`, or the whole message as it is.
std::uint64_t whole_pieces(std::uint64_t elements, int ranks);
std::uint64_t whole_message(std::uint64_t elements, int ranks);
// Input and output of `count` elements each, one buffer in place.
CallLayout one_buffer_each(std::uint64_t count, int ranks, int rank);
// This rank's contributions at the elements 0, 1, ... of its input.
void fill_contributions(std::span<float> input, int rank, int ranks, std::uint64_t call,
                        comm::GradientDtype dtype);

}  // namespace dlscale::worker
