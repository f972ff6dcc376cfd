// The CPU device's LSTM layer, built on oneDNN's LSTM primitives.
#pragma once

#include <memory>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/sequence_kernels.hpp"

namespace dlscale::kernels {

// `inputs`: what the recurrent GEMMs read, f32 or bf16 copies of the sequences and weights (then
// the layer's output comes out of oneDNN in bf16 and is widened; gradients stay float).
std::unique_ptr<LstmKernel> make_dnnl_lstm(const dnnl::engine& engine, const dnnl::stream& stream,
                                           const LstmGeometry& geometry,
                                           dnnl::memory::data_type inputs);

}  // namespace dlscale::kernels
