#include "worker/gradient_buckets.hpp"

#include <numeric>

namespace dlscale::worker {

std::vector<GradientBucket> plan_buckets(std::span<const std::size_t> layer_parameter_counts,
                                         std::size_t bucket_bytes) {
  std::vector<std::size_t> offsets(layer_parameter_counts.size());
  std::exclusive_scan(layer_parameter_counts.begin(), layer_parameter_counts.end(), offsets.begin(),
                      std::size_t{0});
  std::vector<GradientBucket> buckets;
  bool open = false;
  for (int layer = int(layer_parameter_counts.size()) - 1; layer >= 0; --layer) {
    const std::size_t count = layer_parameter_counts[layer];
    if (count == 0) continue;
    if (!open) {
      buckets.push_back({layer, layer, offsets[layer], 0});
      open = true;
    }
    GradientBucket& bucket = buckets.back();
    bucket.first_layer = layer;
    bucket.offset = offsets[layer];
    bucket.count += count;
    if (bucket_bytes > 0 && bucket.count * sizeof(float) >= bucket_bytes) open = false;
  }
  return buckets;
}

}  // namespace dlscale::worker
