// Per-channel work on image tensors. On channels-last (NHWC) float (or bf16) tensors, seen as
// [rows x channels] row-major matrices with rows = batch x height x width: a convolution's bias
// and its gradient, and batch norm. On NCHW float tensors, the legacy path's: the convolution's
// bias and ReLU (DLSCALE_CUDA_NCHW_BIAS_RELU=fused) and batch norm
// (DLSCALE_CUDA_NCHW_BATCH_NORM=own). cuDNN's descriptor API runs these slowly on NHWC tensors
// (H200, issue 30: its batch norm and bias gradient took most of resnet-50's and vgg-16's bf16
// steps on the graph path, where the convolutions themselves took a few milliseconds), so the
// graph path runs its own. Every sum over a channel's values is taken in a fixed order (blocks
// sum slabs of rows, or of images, into partial sums, then one block per channel adds the
// partials in double, in a fixed tree), so runs and replayed CUDA graphs repeat their results bit
// for bit. Compiled by nvcc and by the host compiler.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/image_kernels.hpp"

namespace dlscale::kernels {

// Device memory (bytes) that sum_channels needs as scratch for these dimensions.
std::size_t channel_sums_scratch_bytes(std::int64_t rows, int channels);

// sums[c] = sum over r of x[r * channels + c], in float: a convolution's bias gradient. `scratch`
// holds channel_sums_scratch_bytes(rows, channels). Queued on `stream`. T is float or bf16 (bf16
// images, CudaContext::native_is_bf16), here and below.
template <typename T>
void sum_channels(const T* x, std::int64_t rows, int channels, float* sums, void* scratch,
                  cudaStream_t stream);

// A convolution's output gradient as its backward graphs read it, from one pass over dy ([rows x
// channels], NHWC): zero where a fused ReLU's output is 0 (relu_output is that y; null without a
// ReLU), written to `to` (To = __nv_bfloat16 rounds as round_to_bf16 does; float copies), and
// where `sums` is not null, summed per channel before rounding, in float, in sum_channels' order
// and with its scratch: the bias gradient. Without sums the pass is element-wise, so any layout
// and any (rows, channels) factoring of the count will do. From -> To: float -> float,
// float -> bf16, bf16 -> bf16.
template <typename From, typename To>
void prepare_output_gradient(const From* dy, const From* relu_output, To* to, std::int64_t rows,
                             int channels, float* sums, void* scratch, cudaStream_t stream);

// y[r * channels + c] += bias[c], then with `relu` y = max(y, 0): a convolution's bias and ReLU,
// where no fused graph applied them. A null bias adds nothing (a ReLU alone, in any layout).
// In float, the result rounded once where T is bf16.
template <typename T>
void add_channel_bias(T* y, const float* bias, bool relu, std::int64_t rows, int channels,
                      cudaStream_t stream);

// The legacy convolution's bias and fused ReLU on NCHW float images ([batch x channels x pixels]),
// one pass each way (DLSCALE_CUDA_NCHW_BIAS_RELU=fused, cuda_context.hpp), where cuDNN's
// descriptor API takes two. Forward, y in place: y + bias[c] where bias is not null (one float
// addition, as cudnnAddTensor's), then, with relu, y > 0 ? y : 0 (a NaN becomes 0); not both
// absent. Each value's channel comes from its index by FastDivmod where fast_divmod
// (DLSCALE_CUDA_FAST_DIVMOD) and the tensor has fewer than 2^31 values, else by 64-bit division:
// the same channel either way.
void add_bias_and_relu(int batch, int channels, std::int64_t pixels, const float* bias, bool relu,
                       bool fast_divmod, float* y, cudaStream_t stream);

// Device memory (bytes) that relu_mask_and_bias_gradient needs as scratch for these dimensions
// when it sums a bias gradient (none for an empty tensor).
std::size_t nchw_bias_gradient_scratch_bytes(int batch, int channels, std::int64_t pixels);

// Backward, from one pass over dy (NCHW float):
//  - with a fused ReLU (y and masked_dy not null): masked_dy[i] = y[i] > 0 ? dy[i] : 0, the mask
//    cuDNN's ReLU backward gives (it reads the mask from y; a NaN y masks);
//  - with a bias (bias_gradient not null): bias_gradient[c] = the sum over images and pixels of
//    channel c's (masked) dy, in float, in the batch norm's NCHW order (blocks over slabs of
//    images, the partials added in double); `scratch` holds
//    nchw_bias_gradient_scratch_bytes(batch, channels, pixels), 8-byte aligned (as cudaMalloc's
//    memory is).
// Either may be absent, not both; y and masked_dy come together.
// Both queued on `stream`; they allocate nothing, so they may be captured, and repeat their
// results bit for bit.
void relu_mask_and_bias_gradient(int batch, int channels, std::int64_t pixels, const float* y,
                                 const float* dy, float* masked_dy, float* bias_gradient,
                                 void* scratch, cudaStream_t stream);

// Batch norm in training mode (with its optional fused ReLU), by the definition of
// BatchNormGeometry: batch statistics (mean, then the biased variance from the centred values),
// y = scale * (x - mean) / sqrt(var + epsilon) + shift; no running averages (dlscale only trains,
// as cuDNN's batch norm here). On NHWC tensors where the geometry's layout is the graph path's
// native one, else on NCHW ones. On bf16 images x, y and their gradients are bf16; statistics,
// sums and arithmetic stay float.
std::unique_ptr<BatchNormKernel> make_dlscale_batch_norm(const CudaContext& context,
                                                         const BatchNormGeometry& geometry);

}  // namespace dlscale::kernels
