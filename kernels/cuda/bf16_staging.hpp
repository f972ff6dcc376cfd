// The bf16 copies behind --precision bf16 on the GPU (and NCCL's bf16 gradient sums): float
// tensors are rounded into staging memory, cuBLAS, cuDNN or NCCL read (and write) bf16 there, and
// what they write is widened back into float tensors. The float tensors stay the network's own, as
// under PyTorch's autocast. Compiled both by nvcc (C++17) and by the host compiler.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "kernels/cuda/cudnn_support.hpp"

namespace dlscale::kernels {

// Defined in cuda_math.cu, the device's nvcc-compiled file; both queue one kernel on `stream`,
// with four reads in flight per thread where `batched_loads` (CudaContext::batched_loads; the
// same values either way).
// to[i] = from[i] rounded to the nearest bf16, ties to even (__float2bfloat16_rn); NaN stays NaN.
void round_to_bf16(const float* from, __nv_bfloat16* to, std::size_t count, cudaStream_t stream,
                   bool batched_loads = false);
// to[i] = from[i], exactly: every bf16 value is a float value.
void widen_to_float(const __nv_bfloat16* from, float* to, std::size_t count, cudaStream_t stream,
                    bool batched_loads = false);

// Device memory for the bf16 copies of the work queued on one stream. Each call hands out
// regions for one library call; work queued on the same stream afterwards may reuse them, so one
// buffer serves every GEMM and convolution of a device. It grows only on first calls (the eager
// step before a capture reaches the largest size), and keeps what it has outgrown: a graph
// captured earlier may still point into it, and queued work may still read it.
class Bf16Staging {
 public:
  // Regions of counts[i] bf16 values each, one after another, 256-byte aligned as cuBLAS and
  // cuDNN prefer.
  template <std::size_t region_count>
  std::array<__nv_bfloat16*, region_count> regions(
      const std::array<std::size_t, region_count>& counts, cudaStream_t stream) {
    std::array<std::size_t, region_count> bytes{};
    for (std::size_t i = 0; i < region_count; ++i) bytes[i] = counts[i] * sizeof(__nv_bfloat16);
    const auto raw = byte_regions(bytes, stream);
    std::array<__nv_bfloat16*, region_count> result{};
    for (std::size_t i = 0; i < region_count; ++i)
      result[i] = reinterpret_cast<__nv_bfloat16*>(raw[i]);
    return result;
  }

  // The same for regions of bytes[i] bytes: the graph-API convolutions also keep float NHWC
  // copies here (cudnn_graph_convolution.cpp), under every precision.
  template <std::size_t region_count>
  std::array<std::byte*, region_count> byte_regions(
      const std::array<std::size_t, region_count>& bytes, cudaStream_t stream) {
    std::array<std::size_t, region_count> offsets{};
    std::size_t total = 0;
    for (std::size_t i = 0; i < region_count; ++i) {
      offsets[i] = total;
      total += (bytes[i] + alignment - 1) / alignment * alignment;
    }
    if (buffers_.empty() || buffers_.back().size() < total) {
      require_not_capturing(stream, "bf16 staging");
      // Doubling bounds what is kept: everything outgrown adds up to less than the last buffer.
      const std::size_t grown = buffers_.empty() ? 0 : 2 * buffers_.back().size();
      buffers_.emplace_back(std::max(total, grown));
    }
    std::array<std::byte*, region_count> result{};
    for (std::size_t i = 0; i < region_count; ++i)
      result[i] = buffers_.back().as<std::byte>() + offsets[i];
    return result;
  }

 private:
  static constexpr std::size_t alignment = 256;
  std::vector<DeviceBuffer> buffers_;  // the last one is in use
};

}  // namespace dlscale::kernels
