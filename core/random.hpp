// Counter-based random numbers: value i of stream s under seed k is a pure function of (k, s, i).
// Every rank therefore builds the same initial weights and the same teacher network without
// communicating, and a rank's data does not depend on how many ranks there are.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace dlscale {

// SplitMix64's finaliser (Steele, Lea, Flood: "Fast splittable pseudorandom number generators").
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class CounterRandom {
 public:
  CounterRandom(std::uint64_t seed, std::uint64_t stream) : key_(mix64(seed ^ mix64(stream))) {}

  // Uniform in [0, 1), 53 random bits.
  double uniform(std::uint64_t index) const {
    return double(mix64(key_ ^ mix64(index)) >> 11) * 0x1.0p-53;
  }
  // Standard normal by Box-Muller, from two uniforms.
  double normal(std::uint64_t index) const {
    const double u1 = 1.0 - uniform(2 * index);
    const double u2 = uniform(2 * index + 1);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::uint64_t key_;
};

}  // namespace dlscale
