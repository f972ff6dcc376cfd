// Batches of images (or convolution weights) copied between NCHW and NHWC, converting float to
// bf16 or back on the way: the graph-API convolutions run on packed NHWC tensors only, and this
// is how NCHW data, OIHW weights and bf16 copies get there and back; pooling before a dense layer
// re-lays its NHWC output as NCHW with it. Compiled both by nvcc (C++17) and by the host
// compiler.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace dlscale::kernels {

// How a batch of images lies: NCHW, or NHWC (channels last). Weights OIHW are NCHW with
// N = output channels and C = input channels per group; OHWI is their NHWC.
enum class MemoryOrder { nchw, nhwc };

// Dimensions in N, C, H, W order whatever the memory order.
struct ImageBatchShape {
  int batch = 0, channels = 0, height = 0, width = 0;
  std::size_t size() const { return std::size_t(batch) * channels * height * width; }
};

// to = from, re-laid from `from_order` into `to_order` and converted to To (float to bf16 rounds
// to nearest, ties to even, as round_to_bf16 does; bf16 to float is exact). Queued on `stream`.
// Instantiated for float to float, float to bf16 and bf16 to float.
template <typename From, typename To>
void convert_images(const From* from, MemoryOrder from_order, To* to, MemoryOrder to_order,
                    const ImageBatchShape& shape, cudaStream_t stream);

// True when both orders put every element at the same place: one channel, or one pixel.
inline bool orders_agree(const ImageBatchShape& shape) {
  return shape.channels == 1 || (shape.height == 1 && shape.width == 1);
}

}  // namespace dlscale::kernels
