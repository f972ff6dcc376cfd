// A GPT's causal self-attention on cuDNN's fused scaled-dot-product attention (flash attention:
// the scores never reach memory), through NVIDIA's header-only cuDNN frontend. Under --precision
// bf16 by default (DLSCALE_CUDNN_ATTENTION=sdpa, cuda_context.hpp); built only where CMake found
// the frontend (DLSCALE_HAVE_CUDNN_FRONTEND).
#pragma once

#include <memory>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/sequence_kernels.hpp"

namespace dlscale::kernels {

// Whether cuDNN's flash attention reads these heads: it loads 16-byte vectors of a head, and K
// and V start width and 2 width values after Q, so the head width must be a multiple of 8.
bool cudnn_attention_reads(const AttentionGeometry& geometry);

// Whether, besides, every GPU and cuDNN 9 that runs it runs these heads forward and backward:
// cuDNN's attention needs compute capability 8.0 or newer, and its backward a head width of at
// most 128 before Hopper (cuDNN's support matrix). Where the fused attention is the default
// rather than asked for, other models keep the composed attention.
bool cudnn_attention_runs_everywhere(const AttentionGeometry& geometry,
                                     int compute_capability_major);

// A UserError where it does not read them (DLSCALE_CUDNN_ATTENTION=sdpa was asked for).
std::unique_ptr<AttentionKernel> make_cudnn_attention(const CudaContext& context,
                                                      const AttentionGeometry& geometry);

}  // namespace dlscale::kernels
