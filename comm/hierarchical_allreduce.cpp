// Every rank sums its slice of all the host's copies in slot order, so the host's result is the
// same bits whichever rank computes which slice; the slice's sum across hosts is one
// MPI_Allreduce, whose result MPI gives every participant alike. bf16 sums keep both properties:
// add_bf16 is the one rounding of every partial sum, in the window and in Bf16SumOperation, and
// every rank widens the same summed bf16 bits.
#include "comm/hierarchical_allreduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_check.hpp"
#include "core/errors.hpp"

namespace dlscale::comm {

namespace {

// Each rank's slot in the shared window: 4 MiB. Small enough for a container's /dev/shm with
// many ranks, large enough that a piece costs far more than its three host barriers.
constexpr std::size_t slot_bytes = std::size_t(4) << 20;

// How a buffer of floats enters a slot, and how a summed slice leaves one: copied as they are
// for fp32 sums, rounded to bf16 and widened back for bf16 sums.
void store(std::span<const float> values, float* slot) {
  std::memcpy(slot, values.data(), values.size_bytes());
}
void store(std::span<const float> values, std::uint16_t* slot) {
  round_to_bf16(values, {slot, values.size()});
}
void load(const float* slot, std::span<float> values) {
  std::memcpy(values.data(), slot, values.size_bytes());
}
void load(const std::uint16_t* slot, std::span<float> values) {
  widen_from_bf16({slot, values.size()}, values);
}

float add(float a, float b) { return a + b; }
std::uint16_t add(std::uint16_t a, std::uint16_t b) { return add_bf16(a, b); }

}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm comm, GradientDtype dtype) {
  DLSCALE_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(comm, &size_));
  const int rank = rank_;
  DLSCALE_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host_));
  DLSCALE_MPI_CHECK(MPI_Comm_rank(host_, &host_rank_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(host_, &host_size_));
  DLSCALE_MPI_CHECK(MPI_Comm_split(comm, host_rank_, rank, &slice_));
  DLSCALE_MPI_CHECK(MPI_Comm_size(slice_, &hosts_));
  slice_ranks_.resize(std::size_t(hosts_));
  DLSCALE_MPI_CHECK(MPI_Allgather(&rank_, 1, MPI_INT, slice_ranks_.data(), 1, MPI_INT, slice_));
  int fewest = 0, most = 0;
  DLSCALE_MPI_CHECK(MPI_Allreduce(&host_size_, &fewest, 1, MPI_INT, MPI_MIN, comm));
  DLSCALE_MPI_CHECK(MPI_Allreduce(&host_size_, &most, 1, MPI_INT, MPI_MAX, comm));
  if (fewest != most)
    throw UserError(fmt::format(
        "it needs the same number of ranks on every host, but hosts have between {} and {}", fewest,
        most));
  if (dtype == GradientDtype::bf16) bf16_sum_ = std::make_unique<Bf16SumOperation>();
  slot_count_ = slot_bytes / (bf16_sum_ ? sizeof(std::uint16_t) : sizeof(float));
  void* mine = nullptr;
  DLSCALE_MPI_CHECK(
      MPI_Win_allocate_shared(MPI_Aint(slot_bytes), 1, MPI_INFO_NULL, host_, &mine, &window_));
  MPI_Aint size = 0;
  int unit = 0;
  DLSCALE_MPI_CHECK(MPI_Win_shared_query(window_, 0, &size, &unit, &slots_));
  // One passive epoch for the window's life; MPI_Win_sync orders the loads and stores.
  DLSCALE_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  DLSCALE_MPI_CHECK(MPI_Comm_set_errhandler(host_, MPI_ERRORS_RETURN));
  DLSCALE_MPI_CHECK(MPI_Comm_set_errhandler(slice_, MPI_ERRORS_RETURN));
}

HierarchicalAllreduce::~HierarchicalAllreduce() {
  if (window_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(window_);
    MPI_Win_free(&window_);
  }
  if (slice_ != MPI_COMM_NULL) MPI_Comm_free(&slice_);
  if (host_ != MPI_COMM_NULL) MPI_Comm_free(&host_);
}

int HierarchicalAllreduce::host_barrier() {
  int status = MPI_Win_sync(window_);
  if (status == MPI_SUCCESS) status = MPI_Barrier(host_);
  if (status == MPI_SUCCESS) status = MPI_Win_sync(window_);
  return status;
}

int HierarchicalAllreduce::run(const float* input, float* sum, std::size_t count) {
  int status = MPI_SUCCESS;
  for (std::size_t offset = 0; offset < count && status == MPI_SUCCESS; offset += slot_count_) {
    const std::size_t piece = std::min(slot_count_, count - offset);
    status = bf16_sum_ ? run_piece<std::uint16_t>(input + offset, sum + offset, piece)
                       : run_piece<float>(input + offset, sum + offset, piece);
  }
  return status;
}

template <typename Element>
int HierarchicalAllreduce::run_piece(const float* input, float* sum, std::size_t count) {
  const auto slice_begin = [&](int slice) { return count * std::size_t(slice) / host_size_; };
  auto* const slots = static_cast<Element*>(slots_);
  Element* my_slot = slots + std::size_t(host_rank_) * slot_count_;
  store({input, count}, my_slot);
  int status = host_barrier();
  if (status != MPI_SUCCESS) return status;

  // Reduce-scatter: slice host_rank_ of every slot, summed in slot order into my slot.
  const std::size_t begin = slice_begin(host_rank_), end = slice_begin(host_rank_ + 1);
  for (std::size_t i = begin; i < end; ++i) {
    Element total = slots[i];
    for (int slot = 1; slot < host_size_; ++slot)
      total = add(total, slots[std::size_t(slot) * slot_count_ + i]);
    my_slot[i] = total;
  }
  if (hosts_ > 1 && end > begin) {
    constexpr bool bf16 = std::is_same_v<Element, std::uint16_t>;
    status =
        MPI_Allreduce(MPI_IN_PLACE, my_slot + begin, int(end - begin),
                      bf16 ? MPI_UINT16_T : MPI_FLOAT, bf16 ? bf16_sum_->get() : MPI_SUM, slice_);
  }
  // Every rank must reach the barriers, failed or not, so none waits forever.
  const int published = host_barrier();
  if (status == MPI_SUCCESS) status = published;

  // Allgather: each slice from the slot of the rank that summed it.
  for (int slice = 0; slice < host_size_; ++slice) {
    const std::size_t from = slice_begin(slice), to = slice_begin(slice + 1);
    load(slots + std::size_t(slice) * slot_count_ + from, {sum + from, to - from});
  }
  const int read = host_barrier();  // before the next piece overwrites the slots
  return status == MPI_SUCCESS ? read : status;
}

int HierarchicalAllreduce::reduce_scatter(const float* full, float* shard,
                                          std::size_t shard_count) {
  // A piece holds `count` elements of every rank's shard in each slot.
  const std::size_t piece_count = slot_count_ / std::size_t(size_);
  int status = MPI_SUCCESS;
  for (std::size_t offset = 0; offset < shard_count && status == MPI_SUCCESS;
       offset += piece_count) {
    const std::size_t count = std::min(piece_count, shard_count - offset);
    status = bf16_sum_
                 ? reduce_scatter_piece<std::uint16_t>(full, shard, shard_count, offset, count)
                 : reduce_scatter_piece<float>(full, shard, shard_count, offset, count);
  }
  return status;
}

int HierarchicalAllreduce::all_gather(const float* shard, float* full, std::size_t shard_count) {
  // A piece holds `count` elements of every rank's shard in the whole window.
  const std::size_t piece_count = slot_count_ / std::size_t(hosts_);
  int status = MPI_SUCCESS;
  for (std::size_t offset = 0; offset < shard_count && status == MPI_SUCCESS;
       offset += piece_count) {
    const std::size_t count = std::min(piece_count, shard_count - offset);
    status = bf16_sum_ ? all_gather_piece<std::uint16_t>(shard, full, shard_count, offset, count)
                       : all_gather_piece<float>(shard, full, shard_count, offset, count);
  }
  return status;
}

template <typename Element>
int HierarchicalAllreduce::reduce_scatter_piece(const float* full, float* shard,
                                                std::size_t shard_count, std::size_t offset,
                                                std::size_t count) {
  auto* const slots = static_cast<Element*>(slots_);
  Element* my_slot = slots + std::size_t(host_rank_) * slot_count_;
  // Region g of a slot: rank g's shard elements [offset, offset + count).
  for (int g = 0; g < size_; ++g)
    store({full + std::size_t(g) * shard_count + offset, count}, my_slot + std::size_t(g) * count);
  int status = host_barrier();
  if (status != MPI_SUCCESS) return status;

  // The host's sum of the shards of my slice's ranks, in slice order, summed in slot order.
  std::vector<Element> host_sums(std::size_t(hosts_) * count);
  for (int member = 0; member < hosts_; ++member) {
    const std::size_t region = std::size_t(slice_ranks_[std::size_t(member)]) * count;
    for (std::size_t i = 0; i < count; ++i) {
      Element sum = slots[region + i];
      for (int slot = 1; slot < host_size_; ++slot)
        sum = add(sum, slots[std::size_t(slot) * slot_count_ + region + i]);
      host_sums[std::size_t(member) * count + i] = sum;
    }
  }
  std::vector<Element> received(count);
  if (hosts_ > 1) {
    constexpr bool bf16 = std::is_same_v<Element, std::uint16_t>;
    status = MPI_Reduce_scatter_block(host_sums.data(), received.data(), int(count),
                                      bf16 ? MPI_UINT16_T : MPI_FLOAT,
                                      bf16 ? bf16_sum_->get() : MPI_SUM, slice_);
  } else {
    received = std::move(host_sums);
  }
  if (status == MPI_SUCCESS) load(received.data(), {shard + offset, count});
  // Every rank must reach the barrier, failed or not; the next piece overwrites the slots.
  const int read = host_barrier();
  return status == MPI_SUCCESS ? read : status;
}

template <typename Element>
int HierarchicalAllreduce::all_gather_piece(const float* shard, float* full,
                                            std::size_t shard_count, std::size_t offset,
                                            std::size_t count) {
  // The whole window as one array; region g holds rank g's shard elements [offset, +count).
  auto* const window = static_cast<Element*>(slots_);
  std::vector<Element> mine(count), gathered(std::size_t(hosts_) * count);
  store({shard + offset, count}, mine.data());
  int status = MPI_SUCCESS;
  if (hosts_ > 1) {
    const MPI_Datatype type = std::is_same_v<Element, std::uint16_t> ? MPI_UINT16_T : MPI_FLOAT;
    status =
        MPI_Allgather(mine.data(), int(count), type, gathered.data(), int(count), type, slice_);
  } else {
    gathered = std::move(mine);
  }
  if (status == MPI_SUCCESS)
    for (int member = 0; member < hosts_; ++member)
      std::copy_n(gathered.data() + std::size_t(member) * count, count,
                  window + std::size_t(slice_ranks_[std::size_t(member)]) * count);
  const int written = host_barrier();
  if (status == MPI_SUCCESS) status = written;
  if (status == MPI_SUCCESS)
    for (int g = 0; g < size_; ++g)
      load(window + std::size_t(g) * count, {full + std::size_t(g) * shard_count + offset, count});
  const int read = host_barrier();  // before the next piece overwrites the window
  return status == MPI_SUCCESS ? read : status;
}

}  // namespace dlscale::comm
