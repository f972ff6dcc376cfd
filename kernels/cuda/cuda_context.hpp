// What every CUDA kernel of one device shares: the GPU, its compute stream, the cuBLAS and cuDNN
// handles bound to that stream, and the precision the user chose. The CudaDevice owns them; the
// kernels borrow them, so all work of a step is ordered on one stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kernels/device.hpp"

namespace dlscale::kernels {

struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  Precision precision = Precision::fp32;

  // The cuDNN math type that matches the precision: FMA only for fp32, tensor cores for tf32.
  cudnnMathType_t cudnn_math() const {
    return precision == Precision::tf32 ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_FMA_MATH;
  }
};

}  // namespace dlscale::kernels
