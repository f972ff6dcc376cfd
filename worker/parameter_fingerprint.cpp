// Copies device memory to the host in chunks and mixes every 32-bit word into the hash.
#include "worker/parameter_fingerprint.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/random.hpp"

namespace dlscale::worker {

std::uint64_t parameter_fingerprint(kernels::Device& device, std::span<const float> parameters) {
  constexpr std::size_t chunk_values = 1 << 20;
  std::vector<std::uint32_t> chunk(std::min(chunk_values, parameters.size()));
  std::uint64_t hash = mix64(parameters.size());
  for (std::size_t offset = 0; offset < parameters.size(); offset += chunk_values) {
    const std::size_t count = std::min(chunk_values, parameters.size() - offset);
    device.copy_to_host(chunk.data(), parameters.data() + offset, count * sizeof(float));
    for (std::size_t i = 0; i < count; ++i) hash = mix64(hash ^ chunk[i]);
  }
  return hash;
}

}  // namespace dlscale::worker
