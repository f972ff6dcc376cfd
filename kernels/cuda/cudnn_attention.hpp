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

// A UserError where it does not read them (DLSCALE_CUDNN_ATTENTION=sdpa was asked for).
std::unique_ptr<AttentionKernel> make_cudnn_attention(const CudaContext& context,
                                                      const AttentionGeometry& geometry);

}  // namespace dlscale::kernels
