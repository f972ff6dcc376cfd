// The CUDA device's MathOps: cuBLAS for the GEMMs, and small CUDA kernels for the element-wise
// work, the softmax cross-entropy, the embedding and one fused SGD or AdamW update over the flat
// buffer.
// Everything is queued on the context's stream; nothing waits for the host.
#pragma once

#include <memory>

#include "kernels/cuda/cuda_context.hpp"

namespace dlscale::kernels {

std::unique_ptr<MathOps<float>> make_cuda_math_float(const CudaContext& context);
std::unique_ptr<MathOps<double>> make_cuda_math_double(const CudaContext& context);

}  // namespace dlscale::kernels
