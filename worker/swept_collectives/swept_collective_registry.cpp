// The collectives `dlscale comm` sweeps, and what they share: the table's row counts, the ring
// cost structure of the splitting collectives, and the buffers and inputs of several.
#include "worker/swept_collectives/swept_collective.hpp"

#include <algorithm>
#include <array>

#include "core/errors.hpp"
#include "worker/exact_sum_pattern.hpp"

namespace dlscale::worker {

namespace {

// A new collective is its file in this folder and its line here.
const std::array<const SweptCollective*, 5> records = {
    &swept_allreduce, &swept_reduce_scatter, &swept_all_gather, &swept_broadcast, &swept_alltoall};

}  // namespace

std::span<const SweptCollective* const> swept_collectives() { return records; }

const SweptCollective& swept_collective(Collective collective) {
  return **std::find_if(records.begin(), records.end(), [&](const SweptCollective* record) {
    return record->collective == collective;
  });
}

const SweptCollective& find_swept_collective(const std::string& name) {
  std::vector<std::string> names;
  for (const SweptCollective* record : records) names.push_back(record->name);
  require_choice("--collective", "collective", name, names);
  return **std::find_if(records.begin(), records.end(),
                        [&](const SweptCollective* record) { return record->name == name; });
}

std::vector<std::uint64_t> table_element_counts(const SweptCollective& collective,
                                                std::span<const std::uint64_t> sizes_bytes,
                                                std::size_t element_bytes, int ranks) {
  std::vector<std::uint64_t> counts;
  for (const std::uint64_t bytes : sizes_bytes) {
    const std::uint64_t count = collective.row_count(bytes / element_bytes, ranks);
    if (count > 0 && (counts.empty() || count > counts.back())) counts.push_back(count);
  }
  return counts;
}

double ring_steps(int ranks) { return ranks - 1.0; }

double ring_bus_factor(int ranks) { return (ranks - 1.0) / double(ranks); }

std::uint64_t whole_pieces(std::uint64_t elements, int ranks) {
  return elements / std::uint64_t(ranks) * std::uint64_t(ranks);
}

std::uint64_t whole_message(std::uint64_t elements, int /*ranks*/) { return elements; }

CallLayout one_buffer_each(std::uint64_t count, int /*ranks*/, int /*rank*/) {
  return {count, count, 0, 0};
}

void fill_contributions(std::span<float> input, int rank, int /*ranks*/, std::uint64_t call,
                        comm::GradientDtype dtype) {
  fill_contribution(input, rank, call, dtype);
}

}  // namespace dlscale::worker
