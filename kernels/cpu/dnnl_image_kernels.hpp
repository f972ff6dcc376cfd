// Convolution, pooling and batch-norm kernels for the CPU device, built on oneDNN primitives.
#pragma once

#include <memory>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/dnnl_image_layouts.hpp"
#include "kernels/image_kernels.hpp"

namespace dlscale::kernels {

// With `inputs` bf16, the convolution reads bf16 copies of its input, weights and output
// gradient (converted as they are staged) and writes float outputs and gradients.
std::unique_ptr<ConvolutionKernel> make_dnnl_convolution(const dnnl::engine& engine,
                                                         const dnnl::stream& stream,
                                                         const DnnlImageLayouts& layouts,
                                                         const ConvolutionGeometry& geometry,
                                                         dnnl::memory::data_type inputs);

std::unique_ptr<PoolingKernel> make_dnnl_pooling(const dnnl::engine& engine,
                                                 const dnnl::stream& stream,
                                                 const DnnlImageLayouts& layouts,
                                                 const PoolingGeometry& geometry);

std::unique_ptr<BatchNormKernel> make_dnnl_batch_norm(const dnnl::engine& engine,
                                                      const dnnl::stream& stream,
                                                      const DnnlImageLayouts& layouts,
                                                      const BatchNormGeometry& geometry);

}  // namespace dlscale::kernels
