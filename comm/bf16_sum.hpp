// Gradient sums in bf16, as PyTorch DDP's bf16 compression hook sends them: each rank rounds its
// float gradients to bf16 (round to nearest even), MPI sums the bf16 values with an operation of
// ours (each partial sum taken in float and rounded back to bf16), and every rank widens the
// result to float again. Half the bytes of a float sum, for the rounding of one bf16 per step.
#pragma once

#include <mpi.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>

namespace dlscale::comm {

// Round to nearest even, as the bf16 instructions do; NaN stays NaN.
inline std::uint16_t to_bf16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return std::uint16_t((bits >> 16) | 0x40);  // a quiet NaN
  const std::uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return std::uint16_t((bits + rounding) >> 16);
}

inline float from_bf16(std::uint16_t value) {
  return std::bit_cast<float>(std::uint32_t(value) << 16);
}

// One partial sum of a bf16 sum: taken in float, rounded back to bf16. Every bf16 sum (the MPI
// operation below, the hierarchical allreduce's shared-memory step) adds this way, so each is
// the same bits wherever it is taken. Inline: it is the inner loop of those sums.
inline std::uint16_t add_bf16(std::uint16_t a, std::uint16_t b) {
  return to_bf16(from_bf16(a) + from_bf16(b));
}

// The same conversions over whole buffers.
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
