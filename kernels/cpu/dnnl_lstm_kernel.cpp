// oneDNN LSTM, one layer, left to right, zero initial state. In float, forward reads the weights
// in their plain ldigo layout from the parameter buffer. oneDNN's backward wants its own weight
// layout and accumulates weight gradients, so each backward reorders the weights in, clears its
// gradient buffers, runs, and reorders the gradients out to the plain layout: two small copies
// per step next to the recurrent GEMMs.
// Under bf16, oneDNN's bf16 LSTM reads bf16 copies of the input sequence and the weights and
// writes its output sequence in bf16 (widened to float for the next layer); the bias, the cell
// state, and every gradient stay float, as oneDNN's bf16 training configuration has them. Backward
// reads the bf16 input and output that forward left in its staging buffers.
#include "kernels/cpu/dnnl_lstm_kernel.hpp"

#include <cstring>
#include <vector>

#include "kernels/cpu/dnnl_check.hpp"
#include "kernels/cpu/dnnl_support.hpp"

namespace dlscale::kernels {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;
constexpr auto left_to_right = dnnl::rnn_direction::unidirectional_left2right;

void zero(memory& buffer) {
  std::memset(buffer.get_data_handle(), 0, buffer.get_desc().get_size());
}

class DnnlLstm final : public LstmKernel {
 public:
  DnnlLstm(const dnnl::engine& engine, const dnnl::stream& stream, const LstmGeometry& geometry,
           memory::data_type inputs)
      : engine_(engine),
        stream_(stream),
        geometry_(geometry),
        inputs_(inputs),
        input_weights_desc_({1, 1, geometry.inputs, 4, geometry.hidden}, f32, tag::ldigo),
        recurrent_weights_desc_({1, 1, geometry.hidden, 4, geometry.hidden}, f32, tag::ldigo),
        bias_desc_({1, 1, 4, geometry.hidden}, f32, tag::ldgo) {}

  void forward(int batch, const float* x, const float* parameters, float* y) override {
    auto& p = primitives_for(batch);
    const memory output = wrap(p.output_desc, engine_, y);
    DLSCALE_DNNL_CHECK(p.forward.execute(
        stream_,
        {{DNNL_ARG_SRC_LAYER,
          p.sequence_in.source(wrap(p.input_desc, engine_, x), engine_, stream_)},
         {DNNL_ARG_WEIGHTS_LAYER,
          p.input_weights_in.source(wrap(input_weights_desc_, engine_, input_weights(parameters)),
                                    engine_, stream_)},
         {DNNL_ARG_WEIGHTS_ITER,
          p.recurrent_weights_in.source(
              wrap(recurrent_weights_desc_, engine_, recurrent_weights(parameters)), engine_,
              stream_)},
         {DNNL_ARG_BIAS, wrap(bias_desc_, engine_, bias(parameters))},
         {DNNL_ARG_DST_LAYER, p.sequence_out.target(output, engine_)},
         {DNNL_ARG_WORKSPACE, p.workspace}}));
    p.sequence_out.finish(output, stream_);
    stream_.wait();
  }

  void backward(int batch, const float* x, const float* parameters, const float* y,
                const float* output_gradient, float* input_gradient,
                float* parameter_gradient) override {
    auto& p = primitives_for(batch);
    auto plain_input_weights = wrap(input_weights_desc_, engine_, input_weights(parameters));
    auto plain_recurrent_weights =
        wrap(recurrent_weights_desc_, engine_, recurrent_weights(parameters));
    DLSCALE_DNNL_CHECK(dnnl::reorder(plain_input_weights, p.input_weights)
                           .execute(stream_, plain_input_weights, p.input_weights));
    DLSCALE_DNNL_CHECK(dnnl::reorder(plain_recurrent_weights, p.recurrent_weights)
                           .execute(stream_, plain_recurrent_weights, p.recurrent_weights));
    zero(p.input_weights_gradient);
    zero(p.recurrent_weights_gradient);
    zero(p.bias_gradient);
    float* data_gradient = input_gradient;
    if (data_gradient == nullptr) {
      p.discarded_gradient.resize(std::size_t(batch) * geometry_.steps * geometry_.inputs);
      data_gradient = p.discarded_gradient.data();
    }
    // The sequences as forward read and wrote them (in bf16, its staging buffers still hold them).
    DLSCALE_DNNL_CHECK(p.backward.execute(
        stream_,
        {{DNNL_ARG_SRC_LAYER, p.sequence_in.target(wrap(p.input_desc, engine_, x), engine_)},
         {DNNL_ARG_WEIGHTS_LAYER, p.input_weights},
         {DNNL_ARG_WEIGHTS_ITER, p.recurrent_weights},
         {DNNL_ARG_BIAS, wrap(bias_desc_, engine_, bias(parameters))},
         {DNNL_ARG_DST_LAYER, p.sequence_out.target(wrap(p.output_desc, engine_, y), engine_)},
         {DNNL_ARG_DIFF_DST_LAYER, wrap(p.output_desc, engine_, output_gradient)},
         {DNNL_ARG_WORKSPACE, p.workspace},
         {DNNL_ARG_DIFF_SRC_LAYER, wrap(p.input_desc, engine_, data_gradient)},
         {DNNL_ARG_DIFF_WEIGHTS_LAYER, p.input_weights_gradient},
         {DNNL_ARG_DIFF_WEIGHTS_ITER, p.recurrent_weights_gradient},
         {DNNL_ARG_DIFF_BIAS, p.bias_gradient}}));
    auto plain_gradients = {
        std::pair{&p.input_weights_gradient,
                  wrap(input_weights_desc_, engine_, input_weights(parameter_gradient))},
        std::pair{&p.recurrent_weights_gradient,
                  wrap(recurrent_weights_desc_, engine_, recurrent_weights(parameter_gradient))},
        std::pair{&p.bias_gradient, wrap(bias_desc_, engine_, bias(parameter_gradient))}};
    for (auto [from, to] : plain_gradients)
      DLSCALE_DNNL_CHECK(dnnl::reorder(*from, to).execute(stream_, *from, to));
    stream_.wait();
  }

 private:
  struct Primitives {
    memory::desc input_desc, output_desc;
    dnnl::lstm_forward forward;
    dnnl::lstm_backward backward;
    // What forward reads and writes, in its data type: the float sequences and weights
    // themselves, or bf16 copies.
    LayoutStage sequence_in, sequence_out, input_weights_in, recurrent_weights_in;
    memory workspace;                         // gate activations kept by forward for backward
    memory input_weights, recurrent_weights;  // in the layout and data type backward wants
    memory input_weights_gradient, recurrent_weights_gradient, bias_gradient;
    std::vector<float> discarded_gradient;
  };

  template <typename Pointer>
  Pointer input_weights(Pointer parameters) const {
    return parameters;
  }
  template <typename Pointer>
  Pointer recurrent_weights(Pointer parameters) const {
    return parameters + geometry_.input_weight_count();
  }
  template <typename Pointer>
  Pointer bias(Pointer parameters) const {
    return parameters + geometry_.input_weight_count() + geometry_.recurrent_weight_count();
  }

  Primitives& primitives_for(int batch) {
    return primitives_.get(batch, [&](int b) { return build(b); });
  }

  Primitives build(int batch) {
    const auto& g = geometry_;
    Primitives p;
    // Batch-major (ntc) sequences: each sample's steps are contiguous, as the Network lays out.
    p.input_desc = memory::desc({g.steps, batch, g.inputs}, f32, tag::ntc);
    p.output_desc = memory::desc({g.steps, batch, g.hidden}, f32, tag::ntc);
    const memory::desc none;  // zero initial state, final state not needed
    const memory::desc any_input_weights({1, 1, g.inputs, 4, g.hidden}, f32, tag::any);
    const memory::desc any_recurrent_weights({1, 1, g.hidden, 4, g.hidden}, f32, tag::any);
    // In float, forward reads the plain weights and sequences; in bf16, copies of its choosing.
    const bool plain = inputs_ == f32;
    const memory::desc input_sequence({g.steps, batch, g.inputs}, inputs_, tag::ntc);
    const memory::desc output_sequence({g.steps, batch, g.hidden}, inputs_, tag::ntc);
    const memory::desc read_input_weights({1, 1, g.inputs, 4, g.hidden}, inputs_, tag::any);
    const memory::desc read_recurrent_weights({1, 1, g.hidden, 4, g.hidden}, inputs_, tag::any);
    const auto forward_pd = DLSCALE_DNNL_CHECK(dnnl::lstm_forward::primitive_desc(
        dnnl::lstm_forward::desc(dnnl::prop_kind::forward_training, left_to_right, input_sequence,
                                 none, none, plain ? input_weights_desc_ : read_input_weights,
                                 plain ? recurrent_weights_desc_ : read_recurrent_weights,
                                 bias_desc_, output_sequence, none, none),
        engine_));
    const auto backward_pd = DLSCALE_DNNL_CHECK(dnnl::lstm_backward::primitive_desc(
        dnnl::lstm_backward::desc(dnnl::prop_kind::backward, left_to_right, input_sequence, none,
                                  none, read_input_weights, read_recurrent_weights, bias_desc_,
                                  output_sequence, none, none, p.input_desc, none, none,
                                  any_input_weights, any_recurrent_weights, bias_desc_,
                                  p.output_desc, none, none),
        engine_, forward_pd));
    p.sequence_in = LayoutStage(forward_pd.src_layer_desc());
    p.sequence_out = LayoutStage(forward_pd.dst_layer_desc());
    p.input_weights_in = LayoutStage(forward_pd.weights_layer_desc());
    p.recurrent_weights_in = LayoutStage(forward_pd.weights_iter_desc());
    require_address_space_for_a_primitive();
    p.forward = dnnl::lstm_forward(forward_pd);
    p.backward = dnnl::lstm_backward(backward_pd);
    p.workspace = memory(forward_pd.workspace_desc(), engine_);
    p.input_weights = memory(backward_pd.weights_layer_desc(), engine_);
    p.recurrent_weights = memory(backward_pd.weights_iter_desc(), engine_);
    p.input_weights_gradient = memory(backward_pd.diff_weights_layer_desc(), engine_);
    p.recurrent_weights_gradient = memory(backward_pd.diff_weights_iter_desc(), engine_);
    p.bias_gradient = memory(backward_pd.diff_bias_desc(), engine_);
    return p;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  LstmGeometry geometry_;
  memory::data_type inputs_;
  memory::desc input_weights_desc_, recurrent_weights_desc_, bias_desc_;
  PrimitivesPerBatch<Primitives> primitives_;
};

}  // namespace

std::unique_ptr<LstmKernel> make_dnnl_lstm(const dnnl::engine& engine, const dnnl::stream& stream,
                                           const LstmGeometry& geometry, memory::data_type inputs) {
  return std::make_unique<DnnlLstm>(engine, stream, geometry, inputs);
}

}  // namespace dlscale::kernels
