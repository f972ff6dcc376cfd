// A 64-bit fingerprint of a parameter buffer's exact bits. Ranks compare fingerprints to prove
// that data-parallel training kept their replicas bit-identical.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/device.hpp"

namespace dlscale::worker {

std::uint64_t parameter_fingerprint(kernels::Device& device, std::span<const float> parameters);

}  // namespace dlscale::worker
