// Runs on the communication thread, which has one core at most: plain loops, no OpenMP.
#include "comm/bf16_sum.hpp"

#include "comm/mpi_check.hpp"

namespace dlscale::comm {

namespace {

void bf16_sum(void* in, void* in_out, int* count, MPI_Datatype* /*type*/) {
  const auto* addends = static_cast<const std::uint16_t*>(in);
  auto* sums = static_cast<std::uint16_t*>(in_out);
  for (int i = 0; i < *count; ++i) sums[i] = add_bf16(addends[i], sums[i]);
}

}  // namespace

void round_to_bf16(std::span<const float> values, std::span<std::uint16_t> rounded) {
  for (std::size_t i = 0; i < values.size(); ++i) rounded[i] = to_bf16(values[i]);
}

void widen_from_bf16(std::span<const std::uint16_t> rounded, std::span<float> values) {
  for (std::size_t i = 0; i < rounded.size(); ++i) values[i] = from_bf16(rounded[i]);
}

Bf16SumOperation::Bf16SumOperation() {
  DLSCALE_MPI_CHECK(MPI_Op_create(bf16_sum, /*commute=*/1, &operation_));
}

Bf16SumOperation::~Bf16SumOperation() {
  if (operation_ != MPI_OP_NULL) MPI_Op_free(&operation_);
}

}  // namespace dlscale::comm
