// oneDNN LSTM, one layer, left to right, zero initial state. Forward reads the weights in their
// plain ldigo layout from the parameter buffer. oneDNN's backward wants its own weight layout
// and accumulates weight gradients, so each backward reorders the weights in, clears its gradient
// buffers, runs, and reorders the gradients out to the plain layout: two small copies per step
// next to the recurrent GEMMs.
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
  DnnlLstm(const dnnl::engine& engine, const dnnl::stream& stream, const LstmGeometry& geometry)
      : engine_(engine),
        stream_(stream),
        geometry_(geometry),
        input_weights_desc_({1, 1, geometry.inputs, 4, geometry.hidden}, f32, tag::ldigo),
        recurrent_weights_desc_({1, 1, geometry.hidden, 4, geometry.hidden}, f32, tag::ldigo),
        bias_desc_({1, 1, 4, geometry.hidden}, f32, tag::ldgo) {}

  void forward(int batch, const float* x, const float* parameters, float* y) override {
    auto& p = primitives_for(batch);
    DLSCALE_DNNL_CHECK(p.forward.execute(
        stream_,
        {{DNNL_ARG_SRC_LAYER, wrap(p.input_desc, engine_, x)},
         {DNNL_ARG_WEIGHTS_LAYER, wrap(input_weights_desc_, engine_, input_weights(parameters))},
         {DNNL_ARG_WEIGHTS_ITER,
          wrap(recurrent_weights_desc_, engine_, recurrent_weights(parameters))},
         {DNNL_ARG_BIAS, wrap(bias_desc_, engine_, bias(parameters))},
         {DNNL_ARG_DST_LAYER, wrap(p.output_desc, engine_, y)},
         {DNNL_ARG_WORKSPACE, p.workspace}}));
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
    DLSCALE_DNNL_CHECK(p.backward.execute(
        stream_, {{DNNL_ARG_SRC_LAYER, wrap(p.input_desc, engine_, x)},
                  {DNNL_ARG_WEIGHTS_LAYER, p.input_weights},
                  {DNNL_ARG_WEIGHTS_ITER, p.recurrent_weights},
                  {DNNL_ARG_BIAS, wrap(bias_desc_, engine_, bias(parameters))},
                  {DNNL_ARG_DST_LAYER, wrap(p.output_desc, engine_, y)},
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
    memory workspace;                         // gate activations kept by forward for backward
    memory input_weights, recurrent_weights;  // in the layout backward wants
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
    const auto forward_pd = DLSCALE_DNNL_CHECK(dnnl::lstm_forward::primitive_desc(
        dnnl::lstm_forward::desc(dnnl::prop_kind::forward_training, left_to_right, p.input_desc,
                                 none, none, input_weights_desc_, recurrent_weights_desc_,
                                 bias_desc_, p.output_desc, none, none),
        engine_));
    const auto backward_pd = DLSCALE_DNNL_CHECK(dnnl::lstm_backward::primitive_desc(
        dnnl::lstm_backward::desc(
            dnnl::prop_kind::backward, left_to_right, p.input_desc, none, none, any_input_weights,
            any_recurrent_weights, bias_desc_, p.output_desc, none, none, p.input_desc, none, none,
            any_input_weights, any_recurrent_weights, bias_desc_, p.output_desc, none, none),
        engine_, forward_pd));
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
  memory::desc input_weights_desc_, recurrent_weights_desc_, bias_desc_;
  PrimitivesPerBatch<Primitives> primitives_;
};

}  // namespace

std::unique_ptr<LstmKernel> make_dnnl_lstm(const dnnl::engine& engine, const dnnl::stream& stream,
                                           const LstmGeometry& geometry) {
  return std::make_unique<DnnlLstm>(engine, stream, geometry);
}

}  // namespace dlscale::kernels
