// The CUDA device's image kernels on cuDNN's descriptor API: convolution in NCHW (its algorithms
// chosen once per layer by cuDNN's own search; the legacy path, DLSCALE_CUDNN_API=legacy), max and
// average pooling, and batch normalization (with the ReLU fused where the geometry asks for it).
// Pooling and batch norm take native tensors as NHWC where the context says so (the graph path).
#pragma once

#include <memory>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/image_kernels.hpp"

namespace dlscale::kernels {

std::unique_ptr<ConvolutionKernel> make_cudnn_convolution(const CudaContext& context,
                                                          const ConvolutionGeometry& geometry);
std::unique_ptr<PoolingKernel> make_cudnn_pooling(const CudaContext& context,
                                                  const PoolingGeometry& geometry);
std::unique_ptr<BatchNormKernel> make_cudnn_batch_norm(const CudaContext& context,
                                                       const BatchNormGeometry& geometry);

}  // namespace dlscale::kernels
