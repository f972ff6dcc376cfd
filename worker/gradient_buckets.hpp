// Gradient buckets, as PyTorch DDP and Horovod make them: whole layers' gradients grouped, from
// the last layer back, into slices of the flat gradient buffer of at least bucket_bytes each.
// Backward produces gradients in that order, so a bucket can be summed across ranks as soon as
// its lowest layer is done, while backward computes the layers below it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace dlscale::worker {

struct GradientBucket {
  int first_layer = 0;  // lowest layer index in the bucket; ready once its backward is done
  int last_layer = 0;
  std::size_t offset = 0;  // into the flat gradient buffer, in values
  std::size_t count = 0;
};

// Buckets in the order backward fills them. bucket_bytes 0 puts every gradient in one bucket.
// Layers without parameters belong to no bucket.
std::vector<GradientBucket> plan_buckets(std::span<const std::size_t> layer_parameter_counts,
                                         std::size_t bucket_bytes);

}  // namespace dlscale::worker
