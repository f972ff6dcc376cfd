// A GPT's causal self-attention on cuDNN's fused scaled-dot-product attention (flash attention:
// the scores never reach memory), through NVIDIA's header-only cuDNN frontend. Selected by
// DLSCALE_CUDNN_ATTENTION=sdpa under --precision bf16 (cuda_context.hpp); built only where CMake
// found the frontend (DLSCALE_HAVE_CUDNN_FRONTEND).
#pragma once

#include <memory>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/sequence_kernels.hpp"

namespace dlscale::kernels {

std::unique_ptr<AttentionKernel> make_cudnn_attention(const CudaContext& context,
                                                      const AttentionGeometry& geometry);

}  // namespace dlscale::kernels
