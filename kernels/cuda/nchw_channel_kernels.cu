// The legacy convolution's bias and ReLU in one pass over NCHW float images each way
// (nchw_channel_kernels.hpp).
//
// Forward is element-wise: one thread per value (or per four), its channel found from its index
// (channel_index.cuh).
//
// Backward's sum runs in two kernels, as channel_kernels.cu's do. First a grid of channels x
// slabs blocks: block (c, s) reads channel c of a slab of consecutive images, each image's `pixels`
// floats contiguous at (n * channels + c) * pixels; its warps take the slab's images in turn and a
// warp's lanes stride over one image's pixels, so a warp reads consecutive floats (coalesced) and
// no thread needs a division to find its image. Each lane adds its values in order, each warp
// adds its lanes in a fixed shuffle tree, and thread 0 adds the warps in order, writing one
// partial per slab and channel. Then one thread per channel adds its slabs' partials in slab
// order, in double. No atomics: for one geometry and one set of buffers every sum is taken in the
// same order on every run and in every replay of a captured graph, so results repeat bit for bit.
// (Which of the float4 and float loops runs depends on pixels and on the buffers' alignment, which
// a layer's buffers keep from step to step; the two add in different orders.)
#include "kernels/cuda/nchw_channel_kernels.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/channel_index.cuh"
#include "kernels/cuda/cuda_check.hpp"

namespace dlscale::kernels {

namespace {

constexpr int lanes = 32;                         // a warp
constexpr int slab_threads = 256;                 // per block of the first kernel
constexpr int slab_warps = slab_threads / lanes;  // images of a slab read at once
// Blocks the first kernel aims for: a few per multiprocessor of a large GPU (H200: 132), so that
// every multiprocessor has warps enough to keep its loads in flight. alexnet-r's convolutions at
// batch 1024 have 32, 32 and 64 channels of 32x32, 15x15 and 7x7 pixels: 32 slabs of 32 images,
// then 16 of 64.
constexpr int slab_blocks = 1024;
constexpr int finish_threads = 256;

struct Slabs {
  int count = 1;        // blocks per channel
  int images_each = 1;  // consecutive images per block; the last slab may have fewer
};

// At least one image per slab; one slab per channel where the channels alone fill the GPU.
Slabs slabs_for(int batch, int channels) {
  const int wanted = std::max(1, slab_blocks / std::max(channels, 1));
  const int count = std::max(1, std::min(wanted, batch));
  const int images_each = (batch + count - 1) / count;
  return {(batch + images_each - 1) / images_each, images_each};
}

// The gradient through the ReLU: dy where y > 0, else 0 (a NaN y too), as cuDNN's
// CUDNN_ACTIVATION_RELU backward gives it.
__device__ float through_relu(float y, float dy) { return y > 0.0f ? dy : 0.0f; }
__device__ float4 through_relu(float4 y, float4 dy) {
  return make_float4(through_relu(y.x, dy.x), through_relu(y.y, dy.y), through_relu(y.z, dy.z),
                     through_relu(y.w, dy.w));
}

__device__ float sum_of(float value) { return value; }
__device__ float sum_of(float4 value) { return (value.x + value.y) + (value.z + value.w); }

// V: float, or float4 where pixels is a multiple of 4 and every tensor 16-byte aligned (`width`
// counts V per image, so every image starts on a V). Relu: write the masked gradient, reading the
// mask from y. Sum: write each slab's partial sum of the (masked) gradient per channel.
template <typename V, bool Relu, bool Sum>
__global__ void __launch_bounds__(slab_threads)
    mask_and_sum_slabs_kernel(int batch, int channels, std::int64_t width, int images_each,
                              const V* y, const V* dy, V* masked_dy, float* partials) {
  const int c = blockIdx.x;
  const int first = blockIdx.y * images_each;
  const int end = min(first + images_each, batch);
  const int warp = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  float sum = 0.0f;
  for (int n = first + warp; n < end; n += slab_warps) {
    const std::int64_t image = (std::int64_t(n) * channels + c) * width;
#pragma unroll 4
    for (std::int64_t p = image + lane; p < image + width; p += lanes) {
      V gradient = dy[p];
      if constexpr (Relu) {
        gradient = through_relu(y[p], gradient);
        masked_dy[p] = gradient;
      }
      if constexpr (Sum) sum += sum_of(gradient);
    }
  }
  if constexpr (Sum) {
    // Lanes in a fixed tree (lane 0 ends with the warp's sum), then warps in order.
    for (int offset = lanes / 2; offset > 0; offset /= 2)
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    __shared__ float warp_sums[slab_warps];
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      float block_sum = warp_sums[0];
      for (int w = 1; w < slab_warps; ++w) block_sum += warp_sums[w];
      partials[std::size_t(blockIdx.y) * channels + c] = block_sum;
    }
  }
}

// One thread per channel: its slabs' partials in slab order, in double. channels x slabs is at
// most about slab_blocks, so a channel has many slabs only where there are few channels, and the
// serial sums stay short (1024 adds at most); neighbouring threads read neighbouring partials.
__global__ void finish_bias_gradient_kernel(const float* partials, int slabs, int channels,
                                            float* bias_gradient) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  double sum = 0;
  for (int s = 0; s < slabs; ++s) sum += partials[std::size_t(s) * channels + c];
  bias_gradient[c] = float(sum);
}

__device__ float plus(float value, float bias) { return value + bias; }
__device__ float4 plus(float4 value, float bias) {
  return make_float4(value.x + bias, value.y + bias, value.z + bias, value.w + bias);
}
__device__ float relu(float value) { return value > 0.0f ? value : 0.0f; }
__device__ float4 relu(float4 value) {
  return make_float4(relu(value.x), relu(value.y), relu(value.z), relu(value.w));
}

template <typename V, bool Bias, bool Relu, typename Channels>
__global__ void bias_and_relu_kernel(V* y, const float* bias, std::int64_t count,
                                     Channels channels) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    V value = y[i];
    if constexpr (Bias) value = plus(value, bias[channels.of(i)]);
    if constexpr (Relu) value = relu(value);
    y[i] = value;
  }
}

constexpr int elementwise_threads = 256;
constexpr int most_elementwise_blocks = 132 * 32;  // grid-stride: enough to fill any one GPU

template <typename V, bool Bias, bool Relu>
void launch_bias_and_relu(float* y, const float* bias, int channels, std::int64_t width,
                          std::int64_t count, bool fast_divmod, cudaStream_t stream) {
  const auto blocks = unsigned(std::clamp<std::int64_t>(
      (count + elementwise_threads - 1) / elementwise_threads, 1, most_elementwise_blocks));
  V* values = reinterpret_cast<V*>(y);
  if (fast_divmod && count < (std::int64_t(1) << 31))
    bias_and_relu_kernel<V, Bias, Relu><<<blocks, elementwise_threads, 0, stream>>>(
        values, bias, count, FastChannels{FastDivmod(int(width)), FastDivmod(channels)});
  else
    bias_and_relu_kernel<V, Bias, Relu><<<blocks, elementwise_threads, 0, stream>>>(
        values, bias, count, WideChannels{width, channels});
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

template <typename V>
void launch_bias_and_relu_of(float* y, const float* bias, bool relu, int channels,
                             std::int64_t width, std::int64_t count, bool fast_divmod,
                             cudaStream_t stream) {
  if (bias != nullptr && relu)
    launch_bias_and_relu<V, true, true>(y, bias, channels, width, count, fast_divmod, stream);
  else if (bias != nullptr)
    launch_bias_and_relu<V, true, false>(y, bias, channels, width, count, fast_divmod, stream);
  else
    launch_bias_and_relu<V, false, true>(y, bias, channels, width, count, fast_divmod, stream);
}

bool aligned_to_float4(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignof(float4) == 0;
}

template <typename V, bool Relu, bool Sum>
void launch_slabs(const Slabs& slabs, int batch, int channels, std::int64_t width, const float* y,
                  const float* dy, float* masked_dy, float* partials, cudaStream_t stream) {
  const dim3 grid(unsigned(channels), unsigned(slabs.count));
  mask_and_sum_slabs_kernel<V, Relu, Sum><<<grid, slab_threads, 0, stream>>>(
      batch, channels, width, slabs.images_each, reinterpret_cast<const V*>(y),
      reinterpret_cast<const V*>(dy), reinterpret_cast<V*>(masked_dy), partials);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

// The first kernel's instance for this call: float4 or float, with or without the ReLU and sum.
template <typename V>
void launch_slabs_of(const Slabs& slabs, int batch, int channels, std::int64_t width,
                     const float* y, const float* dy, float* masked_dy, float* partials,
                     cudaStream_t stream) {
  const bool relu = masked_dy != nullptr, sum = partials != nullptr;
  if (relu && sum)
    launch_slabs<V, true, true>(slabs, batch, channels, width, y, dy, masked_dy, partials, stream);
  else if (relu)
    launch_slabs<V, true, false>(slabs, batch, channels, width, y, dy, masked_dy, partials, stream);
  else
    launch_slabs<V, false, true>(slabs, batch, channels, width, y, dy, masked_dy, partials, stream);
}

}  // namespace

void add_bias_and_relu(int batch, int channels, std::int64_t pixels, const float* bias, bool relu,
                       bool fast_divmod, float* y, cudaStream_t stream) {
  if (bias == nullptr && !relu)
    throw std::invalid_argument("NCHW bias and ReLU: neither a bias to add nor a ReLU");
  if (batch <= 0 || channels <= 0 || pixels <= 0) return;
  const std::int64_t count = std::int64_t(batch) * channels * pixels;
  if (pixels % 4 == 0 && aligned_to_float4(y))
    launch_bias_and_relu_of<float4>(y, bias, relu, channels, pixels / 4, count / 4, fast_divmod,
                                    stream);
  else
    launch_bias_and_relu_of<float>(y, bias, relu, channels, pixels, count, fast_divmod, stream);
}

std::size_t nchw_bias_gradient_scratch_bytes(int batch, int channels, std::int64_t pixels) {
  if (batch <= 0 || channels <= 0 || pixels <= 0) return 0;
  return std::size_t(slabs_for(batch, channels).count) * std::size_t(channels) * sizeof(float);
}

void relu_mask_and_bias_gradient(int batch, int channels, std::int64_t pixels, const float* y,
                                 const float* dy, float* masked_dy, float* bias_gradient,
                                 void* scratch, cudaStream_t stream) {
  if ((y == nullptr) != (masked_dy == nullptr))
    throw std::invalid_argument("NCHW ReLU mask: y and the masked gradient come together");
  if (masked_dy == nullptr && bias_gradient == nullptr)
    throw std::invalid_argument("NCHW bias gradient: neither a ReLU mask nor a bias to sum");
  if (batch <= 0 || channels <= 0 || pixels <= 0) {
    // Nothing to read: an empty sum is 0.
    if (bias_gradient != nullptr && channels > 0)
      DLSCALE_CUDA_CHECK(
          cudaMemsetAsync(bias_gradient, 0, std::size_t(channels) * sizeof(float), stream));
    return;
  }
  if (bias_gradient != nullptr && scratch == nullptr)
    throw std::invalid_argument("NCHW bias gradient: no scratch for the partial sums");
  const Slabs slabs = slabs_for(batch, channels);
  auto* partials = bias_gradient != nullptr ? static_cast<float*>(scratch) : nullptr;
  const bool float4s = pixels % 4 == 0 && aligned_to_float4(dy) &&
                       (y == nullptr || (aligned_to_float4(y) && aligned_to_float4(masked_dy)));
  if (float4s)
    launch_slabs_of<float4>(slabs, batch, channels, pixels / 4, y, dy, masked_dy, partials, stream);
  else
    launch_slabs_of<float>(slabs, batch, channels, pixels, y, dy, masked_dy, partials, stream);
  if (bias_gradient == nullptr) return;
  finish_bias_gradient_kernel<<<unsigned((channels + finish_threads - 1) / finish_threads),
                                finish_threads, 0, stream>>>(partials, slabs.count, channels,
                                                             bias_gradient);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dlscale::kernels
