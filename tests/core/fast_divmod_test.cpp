// FastDivmod (core/fast_divmod.hpp) against the integer division it replaces in the GPU's
// element-wise kernels, on the host, where the same arithmetic runs as on the device (the high
// half of a 64-bit product here, __umulhi there). Every dividend its kernels may pass lies in
// [0, 2^31): the edges of that range, the multiples of the divisor and their neighbours near
// the top (where the multiplier's excess accumulates most), and random ones, for divisors 1 to
// 4096, each power of two and its neighbours, and random ones up to 2^31 - 1.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/fast_divmod.hpp"

namespace dlscale {
namespace {

constexpr std::int64_t below = std::int64_t(1) << 31;  // every dividend is less

std::vector<int> divisors() {
  std::vector<int> result;
  for (int d = 1; d <= 4096; ++d) result.push_back(d);
  for (int bit = 12; bit < 31; ++bit)
    for (const std::int64_t d :
         {(std::int64_t(1) << bit) - 1, std::int64_t(1) << bit, (std::int64_t(1) << bit) + 1})
      result.push_back(int(d));
  result.push_back(int(below - 1));
  std::mt19937_64 random(20261127);
  std::uniform_int_distribution<int> any(2, int(below - 1));
  for (int i = 0; i < 2000; ++i) result.push_back(any(random));
  return result;
}

std::vector<int> dividends_for(int d, std::mt19937_64& random) {
  std::vector<int> result{0, 1, 2, int(below - 1), int(below - 2)};
  for (const std::int64_t k :
       {std::int64_t(1), std::int64_t(2), (below - 1) / d - 1, (below - 1) / d}) {
    for (const std::int64_t x : {k * d - 1, k * d, k * d + 1})
      if (x >= 0 && x < below) result.push_back(int(x));
  }
  std::uniform_int_distribution<int> any(0, int(below - 1));
  for (int i = 0; i < 64; ++i) result.push_back(any(random));
  return result;
}

TEST(FastDivmod, EqualsIntegerDivisionForEveryIndexBelowTwoToThe31) {
  std::mt19937_64 random(7);
  std::int64_t checked = 0;
  for (const int d : divisors()) {
    const FastDivmod fast(d);
    ASSERT_EQ(fast.divisor(), d);
    for (const int x : dividends_for(d, random)) {
      int remainder = -1;
      const int quotient = fast.divide(x, remainder);
      ASSERT_EQ(quotient, x / d) << x << " / " << d;
      ASSERT_EQ(remainder, x % d) << x << " % " << d;
      ASSERT_EQ(fast.quotient(x), x / d) << x << " / " << d;
      ++checked;
    }
  }
  EXPECT_GT(checked, 300000);
}

TEST(FastDivmod, EveryDividendOfSmallDivisorsUpToAMillion) {
  for (const int d : {1, 2, 3, 5, 7, 24, 32, 96, 112, 144, 224, 1000}) {
    const FastDivmod fast(d);
    for (int x = 0; x < 1000000; ++x) ASSERT_EQ(fast.quotient(x), x / d) << x << " / " << d;
  }
}

TEST(FastDivmod, RefusesADivisorBelowOne) {
  EXPECT_THROW(FastDivmod(0), std::invalid_argument);
  EXPECT_THROW(FastDivmod(-3), std::invalid_argument);
}

}  // namespace
}  // namespace dlscale
