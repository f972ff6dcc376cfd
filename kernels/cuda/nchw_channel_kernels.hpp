// Per-channel work on NCHW float images, the legacy convolution's bias and fused ReLU in one pass
// each way (DLSCALE_CUDA_NCHW_BIAS_RELU=fused, cuda_context.hpp), where cuDNN's descriptor API
// takes two: forward, y = ReLU(y + bias) in place (cudnnAddTensor, then cudnnActivationForward);
// backward, the gradient through the ReLU and the bias gradient from one read of dy
// (cudnnActivationBackward, then cudnnConvolutionBackwardBias reading the masked gradient again).
// An NCHW tensor holds each (image, channel) pair's pixels contiguously, so a channel's values are
// `batch` runs of `pixels` floats, `channels * pixels` apart. Every sum is taken in a fixed order
// without atomics (blocks sum slabs of images into partial sums, then each channel's partials are
// added in double in slab order), so reruns and replayed CUDA graphs repeat their results bit for
// bit. Compiled by nvcc and by the host compiler.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dlscale::kernels {

// y ([batch x channels x pixels], NCHW float) in place: y + bias[c] where bias is not null (one
// float addition, as cudnnAddTensor's), then, with relu, y > 0 ? y : 0 (a NaN becomes 0). Not
// both absent. Each value's channel comes from its index by FastDivmod where fast_divmod
// (DLSCALE_CUDA_FAST_DIVMOD) and the tensor has fewer than 2^31 values, else by 64-bit division:
// the same channel either way. Queued on `stream`; allocates nothing, so it may be captured. Four
// floats at a time where pixels is a multiple of 4 and y is 16-byte aligned, else one.
void add_bias_and_relu(int batch, int channels, std::int64_t pixels, const float* bias, bool relu,
                       bool fast_divmod, float* y, cudaStream_t stream);

// Device memory (bytes) that relu_mask_and_bias_gradient needs as scratch for these dimensions
// when it sums a bias gradient (none without one).
std::size_t nchw_bias_gradient_scratch_bytes(int batch, int channels, std::int64_t pixels);

// From one pass over dy ([batch x channels x pixels], NCHW float):
//  - with a fused ReLU (y and masked_dy not null): masked_dy[i] = y[i] > 0 ? dy[i] : 0, the mask
//    cuDNN's ReLU backward gives (it reads the mask from y; a NaN y masks);
//  - with a bias (bias_gradient not null): bias_gradient[c] = the sum over images and pixels of
//    channel c's (masked) dy, in float, the partials added in double; `scratch` holds
//    nchw_bias_gradient_scratch_bytes(batch, channels, pixels).
// Either may be absent, not both; y and masked_dy come together. Queued on `stream`; allocates
// nothing, so it may be captured. Reads and writes four floats at a time where pixels is a
// multiple of 4 and the tensors are 16-byte aligned, else one.
void relu_mask_and_bias_gradient(int batch, int channels, std::int64_t pixels, const float* y,
                                 const float* dy, float* masked_dy, float* bias_gradient,
                                 void* scratch, cudaStream_t stream);

}  // namespace dlscale::kernels
