// The CPU device's LSTM layer, built on oneDNN's LSTM primitives.
#pragma once

#include <memory>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/sequence_kernels.hpp"

namespace dlscale::kernels {

std::unique_ptr<LstmKernel> make_dnnl_lstm(const dnnl::engine& engine, const dnnl::stream& stream,
                                           const LstmGeometry& geometry);

}  // namespace dlscale::kernels
