// Max and average pooling by dlscale's own kernels, on NHWC images (the graph path's native
// layout) and, with DLSCALE_CUDA_NCHW_POOLING=own, on the legacy path's NCHW ones; the output in
// the input's layout, or in NCHW where a dense layer follows. cuDNN's descriptor-API pooling took
// about 10 ms of vgg-16's 74 ms bf16 step on the H200 in NHWC, against PyTorch's 3.7 ms, and in
// NCHW 0.85 ms of alexnet-r's 5.67 ms fp32 step (its first max pooling's backward 0.61 ms, where
// PyTorch's three take 0.52: issue 30's profiles). Max pooling keeps each output's position in
// its window, so backward needs neither x nor y; each input's gradient gathers from the windows
// that hold it in a fixed order, with no atomics, so runs and replays repeat bit for bit.
// Semantics as the CPU's oneDNN and cuDNN's modes: max over the window's in-range inputs (the
// first of equal maxima), average over the whole window, padding counted in the divisor. Native
// images are read and written in bf16 where the device keeps them so
// (CudaContext::native_is_bf16), compared and summed in float; an NCHW output before a dense
// layer is float.
#pragma once

#include <memory>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/image_kernels.hpp"

namespace dlscale::kernels {

// Whether these kernels take this window: kernels of 1 to 15 pixels a side (a window position
// fits a byte), a stride of at least 1, padding below the kernel.
bool dlscale_pooling_supports(const PoolingGeometry& geometry);

// Throws std::invalid_argument for a geometry dlscale_pooling_supports refuses.
std::unique_ptr<PoolingKernel> make_dlscale_pooling(const CudaContext& context,
                                                    const PoolingGeometry& geometry);

}  // namespace dlscale::kernels
