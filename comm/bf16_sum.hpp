// Gradient sums in bf16, as PyTorch DDP's bf16 compression hook sends them: each rank rounds its
// float gradients to bf16 (round to nearest even), MPI sums the bf16 values with an operation of
// ours (each partial sum taken in float and rounded back to bf16), and every rank widens the
// result to float again. Half the bytes of a float sum, for the rounding of one bf16 per step.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>

namespace dlscale::comm {

// Round to nearest even, as the bf16 instructions do; NaN stays NaN.
void round_to_bf16(std::span<const float> values, std::span<std::uint16_t> rounded);
void widen_from_bf16(std::span<const std::uint16_t> rounded, std::span<float> values);

// MPI_SUM for bf16 values sent as MPI_UINT16_T; commutative, so every rank gets the same sum.
class Bf16SumOperation {
 public:
  Bf16SumOperation();
  ~Bf16SumOperation();
  Bf16SumOperation(const Bf16SumOperation&) = delete;
  Bf16SumOperation& operator=(const Bf16SumOperation&) = delete;
  MPI_Op get() const { return operation_; }

 private:
  MPI_Op operation_ = MPI_OP_NULL;
};

}  // namespace dlscale::comm
