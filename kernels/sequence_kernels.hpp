// The recurrent part of the Device seam: one LSTM layer over a whole sequence, forward and full
// backpropagation through time, in float. The CPU device implements it with oneDNN.
// Gates follow PyTorch and oneDNN: i, f, g (cell candidate), o, with one bias per gate:
//   i = s(W_xi x + W_hi h + b_i)   f = s(W_xf x + W_hf h + b_f)   g = tanh(W_xg x + W_hg h + b_g)
//   o = s(W_xo x + W_ho h + b_o)   c' = f * c + i * g             h' = o * tanh(c')
#pragma once

#include <cstddef>

namespace dlscale::kernels {

// One LSTM layer, or a stack of `layers` of them (the first from `inputs`, the others from the
// layer below's `hidden` outputs), as PyTorch's nn.LSTM(num_layers=layers) is one module.
struct LstmGeometry {
  int steps = 1;
  int inputs = 0;
  int hidden = 0;
  int layers = 1;

  // Layer `index` of the stack alone (its inputs: `inputs` for the first, `hidden` above it).
  LstmGeometry layer(int index) const { return {steps, index == 0 ? inputs : hidden, hidden, 1}; }
  // One layer's parameters, in this order: W_x [inputs x 4 x hidden], W_h [hidden x 4 x hidden],
  // b [4 x hidden]. A stack's are its layers', first layer first.
  std::size_t input_weight_count() const { return std::size_t(inputs) * 4 * hidden; }
  std::size_t recurrent_weight_count() const { return std::size_t(hidden) * 4 * hidden; }
  std::size_t layer_parameter_count() const {
    return input_weight_count() + recurrent_weight_count() + 4 * std::size_t(hidden);
  }
  std::size_t parameter_count() const {
    std::size_t count = 0;
    for (int index = 0; index < layers; ++index) count += layer(index).layer_parameter_count();
    return count;
  }
  // 2 * 4h * (x + h) per step and layer, forward (docs/workloads.md counts 6x for training).
  double forward_flops_per_sample() const {
    double flops = 0;
    for (int index = 0; index < layers; ++index)
      flops += 2.0 * steps * 4.0 * hidden * (double(layer(index).inputs) + hidden);
    return flops;
  }
};

class LstmKernel {
 public:
  virtual ~LstmKernel() = default;
  // x [batch x steps x inputs] -> y [batch x steps x hidden], starting from zero state.
  virtual void forward(int batch, const float* x, const float* parameters, float* y) = 0;
  // Overwrites parameter_gradient; writes the input gradient unless it is null. Uses what the
  // last forward() kept, once: each backward() follows its own forward().
  virtual void backward(int batch, const float* x, const float* parameters, const float* y,
                        const float* output_gradient, float* input_gradient,
                        float* parameter_gradient) = 0;
};

// Causal multi-head self-attention as one library call a pass (a fused, FlashAttention-style
// kernel: the [steps x steps] scores never reach memory), for devices whose libraries have one.
// model/causal_self_attention_layer.hpp defines the computation and composes it from GEMMs and
// the causal softmax wherever Device::make_attention() returns none.
struct AttentionGeometry {
  int steps = 1;
  int width = 0;  // of the model: heads x head width
  int heads = 1;
  int head_width() const { return width / heads; }
};

class AttentionKernel {
 public:
  virtual ~AttentionKernel() = default;
  // x [batch x steps x 3 width] (each step's queries, keys and values side by side, head h in
  // columns [h d, (h + 1) d) of each) -> y [batch x steps x width], heads side by side.
  virtual void forward(int batch, const float* x, float* y) = 0;
  // Writes input_gradient [batch x steps x 3 width]. Each backward() follows the forward() of the
  // same x and may use what it kept.
  virtual void backward(int batch, const float* x, const float* output_gradient,
                        float* input_gradient) = 0;
};

}  // namespace dlscale::kernels
