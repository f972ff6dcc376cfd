// The CUDA device's LSTM: cuDNN's RNN API over the whole sequence, forward and backward through
// time, with dlscale's parameter layout copied into and out of cuDNN's weight space.
#pragma once

#include <memory>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/sequence_kernels.hpp"

namespace dlscale::kernels {

std::unique_ptr<LstmKernel> make_cudnn_lstm(const CudaContext& context,
                                            const LstmGeometry& geometry);

}  // namespace dlscale::kernels
