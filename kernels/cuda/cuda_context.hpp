// What every CUDA kernel of one device shares: the GPU, its compute stream, the cuBLAS and cuDNN
// handles bound to that stream, the precision the user chose, which cuDNN API the convolutions use
// (and with it the device's native image layout) and, for bf16, the staging memory of the bf16
// copies. The CudaDevice owns them; the kernels borrow them, so all work of a step is ordered on
// one stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kernels/device.hpp"

namespace dlscale::kernels {

class Bf16Staging;
class ConvolutionGraphCache;

// Which cuDNN API the image kernels' convolutions run on (DLSCALE_CUDNN_API): legacy, the
// descriptor API in NCHW (cudnn_image_kernels.cpp), or graph, cuDNN's graph API through the cuDNN
// frontend in NHWC (cudnn_graph_convolution.cpp). Under graph the device's native image layout is
// NHWC, so pooling and batch norm run in NHWC as well; under legacy it is NCHW.
enum class CudnnApi { legacy, graph };
inline constexpr EnumNames<CudnnApi, 2> cudnn_api_names{{"legacy", "graph"}};  // DLSCALE_CUDNN_API

struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  Precision precision = Precision::fp32;
  CudnnApi cudnn_api = CudnnApi::legacy;
  Bf16Staging* bf16_staging = nullptr;  // where GEMMs and convolutions put their bf16 copies
  // The graph convolutions' shared choices and workspace (cudnn_graph_convolution.cpp); null on
  // the legacy path.
  ConvolutionGraphCache* convolution_graphs = nullptr;
  // DLSCALE_CUDA_BATCHED_GEMM=cublas: gemm_strided_batched (the heads of an attention layer) as
  // one cublasGemmStridedBatchedEx; unset or "loop", one cublasGemmEx per matrix. The loop is
  // the default until the batched call has run on a GPU.
  bool cublas_strided_batched = false;

  // ImageLayout::native on this device: NHWC on the graph path (what cuDNN's tensor-core
  // convolutions read and write), NCHW on the legacy one.
  bool native_is_nhwc() const { return cudnn_api == CudnnApi::graph; }

  // The cuDNN math type for float tensors: FMA only for fp32, tensor cores for tf32. Under bf16
  // the kernels that stay in float (the LSTM) compute as under fp32; convolutions, which run on
  // bf16 tensors there, take tensor cores (cudnn_image_kernels.cpp).
  cudnnMathType_t cudnn_math() const {
    return precision == Precision::tf32 ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_FMA_MATH;
  }
};

}  // namespace dlscale::kernels
