// The channel of flat index i of an image tensor, for element-wise kernels that need a
// per-channel value (a bias, batch norm's statistics): (i / run) % channels, where run is how
// many consecutive elements share a channel (1 in NHWC; in NCHW the pixels of one image and
// channel). By 64-bit integer division (any size), or, for indices below 2^31, by FastDivmod's
// multiply and shift, the same value (fast_divmod.hpp). nvcc only.
#pragma once

#include <cstdint>

#include "core/fast_divmod.hpp"

namespace dlscale::kernels {

struct WideChannels {
  std::int64_t run;
  int channels;
  // A run of 1 (NHWC) skips its division, which the compiler cannot know to be by 1.
  __device__ int of(std::int64_t i) const { return int((run == 1 ? i : i / run) % channels); }
};

struct FastChannels {
  FastDivmod run, channels;
  __device__ int of(std::int64_t i) const {
    int c = 0;
    channels.divide(run.quotient(int(i)), c);
    return c;
  }
};

}  // namespace dlscale::kernels
