// Max and average pooling whose input is NHWC (the graph path's native layout), written in NHWC,
// or in NCHW where a dense layer follows, by dlscale's own kernels: cuDNN's descriptor-API
// pooling took about 10 ms of vgg-16's 74 ms bf16 step on the H200 in NHWC, against PyTorch's
// 3.7 ms (issue 30's profile). Max pooling keeps each output's position in its window, so
// backward needs neither x nor y; each input's gradient gathers from the windows that hold it in
// a fixed order, with no atomics, so runs and replays repeat bit for bit. Semantics as the CPU's
// oneDNN and cuDNN's modes: max over the window's in-range inputs (the first of equal maxima),
// average over the whole window, padding counted in the divisor. Native images are read and
// written in bf16 where the device keeps them so (CudaContext::native_is_bf16), compared and
// summed in float; an NCHW output before a dense layer is float.
#pragma once

#include <memory>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/image_kernels.hpp"

namespace dlscale::kernels {

std::unique_ptr<PoolingKernel> make_nhwc_pooling(const CudaContext& context,
                                                 const PoolingGeometry& geometry);

}  // namespace dlscale::kernels
