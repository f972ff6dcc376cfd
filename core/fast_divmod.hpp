// Division of a non-negative 32-bit index by a divisor fixed before a kernel runs, as one
// multiply-high and one shift: a GPU has no integer divider, and each `/` or `%` by a value
// known only at run time costs some 20 instructions (a 64-bit one more), which in an element-wise
// kernel that splits every flat index into (n, h, w, c) outweighs the element's own work. The
// method is Granlund and Montgomery's ("Division by invariant integers using multiplication",
// PLDI 1994), as CUTLASS's FastDivmod applies it: for a divisor d from 2 to 2^31 - 1, with
// l = ceil(log2 d) and p = 31 + l, m = ceil(2^p / d) lies in [2^31, 2^32) and
// floor(x m / 2^p) = floor(x / d) for every x below 2^31. (m exceeds 2^p / d by less than 1, so
// x m / 2^p exceeds x / d by less than x / 2^p < 2^31 / 2^p <= 1 / d; and x / d is at most
// (d - 1) / d above its floor, so the sum stays below the next whole number.) For d = 1 the
// quotient is the dividend. Plain C++ on the host (tests/core/fast_divmod_test.cpp checks it
// there), __umulhi on the device.
#pragma once

#include <cstdint>
#include <stdexcept>

#if defined(__CUDACC__)
#define DLSCALE_HOST_DEVICE __host__ __device__
#else
#define DLSCALE_HOST_DEVICE
#endif

namespace dlscale {

class FastDivmod {
 public:
  FastDivmod() = default;
  explicit FastDivmod(int divisor) : divisor_(divisor) {
    if (divisor < 1) throw std::invalid_argument("FastDivmod: the divisor must be at least 1");
    if (divisor == 1) return;
    int log2_ceiling = 0;
    while ((std::int64_t(1) << log2_ceiling) < divisor) ++log2_ceiling;
    const int p = 31 + log2_ceiling;
    multiplier_ = std::uint32_t(((std::uint64_t(1) << p) + std::uint64_t(divisor) - 1) /
                                std::uint64_t(divisor));
    shift_ = p - 32;
  }

  DLSCALE_HOST_DEVICE int divisor() const { return divisor_; }

  // floor(dividend / divisor), for 0 <= dividend < 2^31.
  DLSCALE_HOST_DEVICE int quotient(int dividend) const {
    if (divisor_ == 1) return dividend;
    return int(high_product(std::uint32_t(dividend)) >> shift_);
  }

  // The quotient, and dividend - quotient * divisor in `remainder`.
  DLSCALE_HOST_DEVICE int divide(int dividend, int& remainder) const {
    const int q = quotient(dividend);
    remainder = dividend - q * divisor_;
    return q;
  }

 private:
  DLSCALE_HOST_DEVICE std::uint32_t high_product(std::uint32_t x) const {
#if defined(__CUDA_ARCH__)
    return __umulhi(x, multiplier_);
#else
    return std::uint32_t((std::uint64_t(x) * multiplier_) >> 32);
#endif
  }

  int divisor_ = 1;
  std::uint32_t multiplier_ = 0;
  int shift_ = 0;
};

}  // namespace dlscale
