// oneDNN convolution, pooling and batch normalization. Primitives are created on the first call
// for a batch size and reused after that, so a training step pays for execution only. Activations
// are in the layouts their geometry names (DnnlImageLayouts); weights stay plain oihw/goihw in
// the Network's flat parameter buffer.
#include "kernels/cpu/dnnl_image_kernels.hpp"

#include <vector>

#include "kernels/cpu/dnnl_check.hpp"
#include "kernels/cpu/dnnl_support.hpp"

namespace dlscale::kernels {

namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

class DnnlConvolution final : public ConvolutionKernel {
 public:
  DnnlConvolution(const dnnl::engine& engine, const dnnl::stream& stream,
                  const DnnlImageLayouts& layouts, const ConvolutionGeometry& geometry,
                  memory::data_type inputs)
      : engine_(engine), stream_(stream), layouts_(layouts), geometry_(geometry), inputs_(inputs) {
    const auto& g = geometry_;
    const int group_in = g.input.channels / g.groups, group_out = g.output_channels / g.groups;
    weights_desc_ =
        g.groups == 1
            ? memory::desc({g.output_channels, g.input.channels, g.kernel, g.kernel}, f32,
                           tag::oihw)
            : memory::desc({g.groups, group_out, group_in, g.kernel, g.kernel}, f32, tag::goihw);
    // A zero-size bias descriptor tells oneDNN there is no bias.
    if (g.bias) bias_desc_ = memory::desc({g.output_channels}, f32, tag::x);
  }

  void forward(int batch, const float* x, const float* weights, const float* bias,
               float* y) override {
    auto& p = primitives_for(batch);
    const memory output = p.output.target(wrap(p.input_output[1], engine_, y), engine_);
    std::unordered_map<int, memory> arguments = {
        {DNNL_ARG_SRC, p.input.source(wrap(p.input_output[0], engine_, x), engine_, stream_)},
        {DNNL_ARG_WEIGHTS,
         p.weights.source(wrap(weights_desc_, engine_, weights), engine_, stream_)},
        {DNNL_ARG_DST, output}};
    if (geometry_.bias) arguments.emplace(DNNL_ARG_BIAS, wrap(bias_desc_, engine_, bias));
    DLSCALE_DNNL_CHECK(p.forward.execute(stream_, arguments));
    p.output.finish(wrap(p.input_output[1], engine_, y), stream_);
    stream_.wait();
  }

  void backward(int batch, const float* x, const float* weights, const float* y,
                const float* output_gradient, float* input_gradient, float* weight_gradient,
                float* bias_gradient) override {
    auto& p = primitives_for(batch);
    memory user_output_gradient = wrap(p.input_output[1], engine_, output_gradient);
    // The fused ReLU's backward: the gradient where y > 0, into the kernel's own buffer (oneDNN's
    // convolution primitives take no backward post-op). One buffer for every batch size, as large
    // as the largest so far: the memory plan counts one (ConvolutionLayer's internal values).
    if (geometry_.relu) {
      if (!relu_gradient_ || relu_gradient_.get_desc().get_size() < p.input_output[1].get_size())
        relu_gradient_ = memory(p.input_output[1], engine_);  // oneDNN's allocation, aligned
      const memory masked = wrap(p.input_output[1], engine_,
                                 static_cast<const float*>(relu_gradient_.get_data_handle()));
      DLSCALE_DNNL_CHECK(
          p.relu_backward.execute(stream_, {{DNNL_ARG_DST, wrap(p.input_output[1], engine_, y)},
                                            {DNNL_ARG_DIFF_DST, user_output_gradient},
                                            {DNNL_ARG_DIFF_SRC, masked}}));
      user_output_gradient = masked;
    }
    const memory user_weight_gradient = wrap(weights_desc_, engine_, weight_gradient);
    const memory weight_gradient_target = p.weight_gradient.target(user_weight_gradient, engine_);
    const memory user_input = wrap(p.input_output[0], engine_, x);
    // A tensor that forward (or the weight pass) already converted to the layout and type a pass
    // reads is read from that staging buffer, not converted again: under bf16 each conversion is
    // a pass over the tensor.
    std::unordered_map<int, memory> arguments = {
        {DNNL_ARG_SRC, p.weights_pass_reads_forward_input
                           ? p.input.target(user_input, engine_)
                           : p.weights_pass_input.source(user_input, engine_, stream_)},
        {DNNL_ARG_DIFF_DST,
         p.weights_pass_output_gradient.source(user_output_gradient, engine_, stream_)},
        {DNNL_ARG_DIFF_WEIGHTS, weight_gradient_target}};
    if (geometry_.bias)
      arguments.emplace(DNNL_ARG_DIFF_BIAS, wrap(bias_desc_, engine_, bias_gradient));
    DLSCALE_DNNL_CHECK(p.backward_weights.execute(stream_, arguments));
    p.weight_gradient.finish(user_weight_gradient, stream_);
    if (input_gradient != nullptr) {
      const memory user_input_gradient = wrap(p.input_output[0], engine_, input_gradient);
      const memory input_gradient_target = p.input_gradient.target(user_input_gradient, engine_);
      const memory user_weights = wrap(weights_desc_, engine_, weights);
      DLSCALE_DNNL_CHECK(p.backward_data.execute(
          stream_,
          {{DNNL_ARG_DIFF_DST,
            p.data_pass_reads_weights_pass_output_gradient
                ? p.weights_pass_output_gradient.target(user_output_gradient, engine_)
                : p.data_pass_output_gradient.source(user_output_gradient, engine_, stream_)},
           {DNNL_ARG_WEIGHTS, p.data_pass_reads_forward_weights
                                  ? p.weights.target(user_weights, engine_)
                                  : p.data_pass_weights.source(user_weights, engine_, stream_)},
           {DNNL_ARG_DIFF_SRC, input_gradient_target}}));
      p.input_gradient.finish(user_input_gradient, stream_);
    }
    stream_.wait();
  }

 private:
  struct Primitives {
    memory::desc input_output[2];  // in the geometry's layouts, as the Network holds them
    dnnl::convolution_forward forward;
    dnnl::convolution_backward_data backward_data;
    dnnl::convolution_backward_weights backward_weights;
    // Every tensor in the layout its primitive chose (see LayoutStage).
    LayoutStage input, weights, output;
    LayoutStage weights_pass_input, weights_pass_output_gradient, weight_gradient;
    LayoutStage data_pass_output_gradient, data_pass_weights, input_gradient;
    // Where two passes read a tensor in the same layout and type, the later one reads the
    // earlier one's copy.
    bool weights_pass_reads_forward_input = false;
    bool data_pass_reads_weights_pass_output_gradient = false;
    bool data_pass_reads_forward_weights = false;
    // A fused ReLU's backward, in the network's layout of y.
    dnnl::eltwise_backward relu_backward;
  };

  Primitives& primitives_for(int batch) {
    return primitives_.get(batch, [&](int b) { return build(b); });
  }

  // Layouts are left to oneDNN (format_tag::any), so it can pick its direct blocked-layout
  // kernels; with plain NCHW/OIHW it falls back to im2col + GEMM, 2-3x slower on thin and
  // depthwise convolutions (docs/performance.md). Native activations are what it picks, so only
  // the weights, the plain network input and its gradient pass through a LayoutStage.
  Primitives build(int batch) {
    const auto& g = geometry_;
    Primitives p;
    p.input_output[0] = layouts_.describe(batch, g.input, g.input_layout);
    p.input_output[1] = layouts_.describe(batch, g.output(), g.output_layout);
    const auto any_like = [](const memory::desc& given, memory::data_type type) {
      return memory::desc(given.dims(), type, tag::any);
    };
    // What the primitives read is in `inputs_` (bf16 under --precision bf16: LayoutStage's
    // reorders convert it); what they write stays float.
    const memory::desc input_read = any_like(p.input_output[0], inputs_);
    const memory::desc input_written = any_like(p.input_output[0], f32);
    const memory::desc output_read = any_like(p.input_output[1], inputs_);
    const memory::desc output_written = any_like(p.input_output[1], f32);
    const memory::desc weights_read = any_like(weights_desc_, inputs_);
    const memory::desc weights_written = any_like(weights_desc_, f32);
    const memory::dims strides = {g.stride, g.stride}, padding = {g.padding, g.padding};
    // The fused ReLU is a post-op: applied to each output as it is written, no second pass.
    dnnl::primitive_attr forward_attributes;
    if (g.relu) {
      dnnl::post_ops post_ops;
      post_ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
      forward_attributes.set_post_ops(post_ops);
    }
    const auto forward_pd = DLSCALE_DNNL_CHECK(dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                        input_read, weights_read, bias_desc_, output_written,
                                        strides, padding, padding),
        forward_attributes, engine_));
    const auto data_pd = DLSCALE_DNNL_CHECK(dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(algorithm::convolution_direct, input_written,
                                              weights_read, output_read, strides, padding, padding),
        engine_, forward_pd));
    const auto weights_pd = DLSCALE_DNNL_CHECK(dnnl::convolution_backward_weights::primitive_desc(
        dnnl::convolution_backward_weights::desc(algorithm::convolution_direct, input_read,
                                                 weights_written, bias_desc_, output_read, strides,
                                                 padding, padding),
        engine_, forward_pd));
    require_address_space_for_a_primitive();
    p.forward = dnnl::convolution_forward(forward_pd);
    p.backward_data = dnnl::convolution_backward_data(data_pd);
    p.backward_weights = dnnl::convolution_backward_weights(weights_pd);
    p.input = LayoutStage(forward_pd.src_desc());
    p.weights = LayoutStage(forward_pd.weights_desc());
    p.output = LayoutStage(forward_pd.dst_desc());
    p.weights_pass_input = LayoutStage(weights_pd.src_desc());
    p.weights_pass_output_gradient = LayoutStage(weights_pd.diff_dst_desc());
    p.weight_gradient = LayoutStage(weights_pd.diff_weights_desc());
    p.data_pass_output_gradient = LayoutStage(data_pd.diff_dst_desc());
    p.data_pass_weights = LayoutStage(data_pd.weights_desc());
    p.input_gradient = LayoutStage(data_pd.diff_src_desc());
    p.weights_pass_reads_forward_input = weights_pd.src_desc() == forward_pd.src_desc();
    p.data_pass_reads_weights_pass_output_gradient =
        data_pd.diff_dst_desc() == weights_pd.diff_dst_desc();
    p.data_pass_reads_forward_weights = data_pd.weights_desc() == forward_pd.weights_desc();
    if (g.relu) {
      // From y alone: ReLU's gradient is dy where y > 0, as where x > 0.
      const memory::desc& y_desc = p.input_output[1];
      const auto relu_forward_pd = DLSCALE_DNNL_CHECK(dnnl::eltwise_forward::primitive_desc(
          dnnl::eltwise_forward::desc(prop_kind::forward_training,
                                      algorithm::eltwise_relu_use_dst_for_bwd, y_desc, 0.0f),
          engine_));
      p.relu_backward =
          dnnl::eltwise_backward(DLSCALE_DNNL_CHECK(dnnl::eltwise_backward::primitive_desc(
              dnnl::eltwise_backward::desc(algorithm::eltwise_relu_use_dst_for_bwd, y_desc, y_desc,
                                           0.0f),
              engine_, relu_forward_pd)));
    }
    return p;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  DnnlImageLayouts layouts_;
  ConvolutionGeometry geometry_;
  memory::data_type inputs_;  // what the primitives read: f32, or bf16
  memory::desc weights_desc_, bias_desc_;
  PrimitivesPerBatch<Primitives> primitives_;
  memory relu_gradient_;  // a fused ReLU's masked output gradient, for the largest batch so far
};

class DnnlPooling final : public PoolingKernel {
 public:
  DnnlPooling(const dnnl::engine& engine, const dnnl::stream& stream,
              const DnnlImageLayouts& layouts, const PoolingGeometry& geometry)
      : engine_(engine), stream_(stream), layouts_(layouts), geometry_(geometry) {}

  void forward(int batch, const float* x, float* y) override {
    auto& p = primitives_for(batch);
    memory output = wrap(p.output_desc, engine_, y);
    std::unordered_map<int, memory> arguments = {{DNNL_ARG_SRC, wrap(p.input_desc, engine_, x)},
                                                 {DNNL_ARG_DST, p.pooled ? p.pooled : output}};
    if (p.workspace) arguments.emplace(DNNL_ARG_WORKSPACE, p.workspace);
    DLSCALE_DNNL_CHECK(p.forward.execute(stream_, arguments));
    if (p.pooled)
      DLSCALE_DNNL_CHECK(dnnl::reorder(p.pooled, output).execute(stream_, p.pooled, output));
    stream_.wait();
  }

  void backward(int batch, const float* output_gradient, float* input_gradient) override {
    auto& p = primitives_for(batch);
    memory gradient = wrap(p.output_desc, engine_, output_gradient);
    if (p.pooled)
      DLSCALE_DNNL_CHECK(dnnl::reorder(gradient, p.pooled).execute(stream_, gradient, p.pooled));
    std::unordered_map<int, memory> arguments = {
        {DNNL_ARG_DIFF_DST, p.pooled ? p.pooled : gradient},
        {DNNL_ARG_DIFF_SRC, wrap(p.input_desc, engine_, input_gradient)}};
    if (p.workspace) arguments.emplace(DNNL_ARG_WORKSPACE, p.workspace);
    DLSCALE_DNNL_CHECK(p.backward.execute(stream_, arguments));
    stream_.wait();
  }

 private:
  struct Primitives {
    memory::desc input_desc, output_desc;
    dnnl::pooling_forward forward;
    dnnl::pooling_backward backward;
    memory workspace;  // max positions, written by forward, read by backward
    // The pooling's own output, in its input's layout, where the geometry asks for another:
    // oneDNN's jit pooling keeps the layout (a change falls back to its reference kernel, 9 ms
    // a step for resnet-56's last pool), so the change is a separate, small reorder.
    memory pooled;
  };

  Primitives& primitives_for(int batch) {
    return primitives_.get(batch, [&](int b) { return build(b); });
  }

  Primitives build(int batch) {
    const auto& g = geometry_;
    Primitives p;
    p.input_desc = layouts_.describe(batch, g.input, g.input_layout);
    p.output_desc = layouts_.describe(batch, g.output(), g.output_layout);
    const memory::desc pooled_desc = layouts_.describe(batch, g.output(), g.input_layout);
    // Average pooling counts padding in the divisor, as PyTorch's default does.
    const algorithm kind = g.kind == PoolingKind::max ? algorithm::pooling_max
                                                      : algorithm::pooling_avg_include_padding;
    const memory::dims strides = {g.stride, g.stride}, kernel = {g.kernel, g.kernel},
                       padding = {g.padding, g.padding};
    const auto forward_pd = DLSCALE_DNNL_CHECK(dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(prop_kind::forward_training, kind, p.input_desc, pooled_desc,
                                    strides, kernel, padding, padding),
        engine_));
    const auto backward_pd = DLSCALE_DNNL_CHECK(dnnl::pooling_backward::primitive_desc(
        dnnl::pooling_backward::desc(kind, p.input_desc, pooled_desc, strides, kernel, padding,
                                     padding),
        engine_, forward_pd));
    require_address_space_for_a_primitive();
    p.forward = dnnl::pooling_forward(forward_pd);
    p.backward = dnnl::pooling_backward(backward_pd);
    if (forward_pd.workspace_desc().get_size() > 0)
      p.workspace = memory(forward_pd.workspace_desc(), engine_);
    if (pooled_desc != p.output_desc) p.pooled = memory(pooled_desc, engine_);
    return p;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  DnnlImageLayouts layouts_;
  PoolingGeometry geometry_;
  PrimitivesPerBatch<Primitives> primitives_;
};

class DnnlBatchNorm final : public BatchNormKernel {
 public:
  DnnlBatchNorm(const dnnl::engine& engine, const dnnl::stream& stream,
                const DnnlImageLayouts& layouts, const BatchNormGeometry& geometry)
      : engine_(engine),
        stream_(stream),
        layouts_(layouts),
        geometry_(geometry),
        channel_desc_({geometry.shape.channels}, f32, tag::x) {}

  void forward(int batch, const float* x, const float* scale, const float* shift,
               float* y) override {
    auto& p = primitives_for(batch);
    std::unordered_map<int, memory> arguments = {
        {DNNL_ARG_SRC, wrap(p.data_desc, engine_, x)},
        {DNNL_ARG_SCALE, wrap(channel_desc_, engine_, scale)},
        {DNNL_ARG_SHIFT, wrap(channel_desc_, engine_, shift)},
        {DNNL_ARG_MEAN, p.mean},
        {DNNL_ARG_VARIANCE, p.variance},
        {DNNL_ARG_DST, wrap(p.data_desc, engine_, y)}};
    if (p.relu_mask) arguments.emplace(DNNL_ARG_WORKSPACE, p.relu_mask);
    DLSCALE_DNNL_CHECK(p.forward.execute(stream_, arguments));
    stream_.wait();
  }

  void backward(int batch, const float* x, const float* scale, const float* shift,
                const float* output_gradient, float* input_gradient, float* scale_gradient,
                float* shift_gradient) override {
    auto& p = primitives_for(batch);
    // oneDNN always produces the input gradient; a first layer discards it into scratch.
    float* data_gradient = input_gradient;
    if (data_gradient == nullptr) {
      p.discarded_gradient.resize(std::size_t(batch) * geometry_.shape.size());
      data_gradient = p.discarded_gradient.data();
    }
    std::unordered_map<int, memory> arguments = {
        {DNNL_ARG_SRC, wrap(p.data_desc, engine_, x)},
        {DNNL_ARG_MEAN, p.mean},
        {DNNL_ARG_VARIANCE, p.variance},
        {DNNL_ARG_DIFF_DST, wrap(p.data_desc, engine_, output_gradient)},
        {DNNL_ARG_SCALE, wrap(channel_desc_, engine_, scale)},
        {DNNL_ARG_SHIFT, wrap(channel_desc_, engine_, shift)},  // oneDNN 2.6 asks
        {DNNL_ARG_DIFF_SRC, wrap(p.data_desc, engine_, data_gradient)},
        {DNNL_ARG_DIFF_SCALE, wrap(channel_desc_, engine_, scale_gradient)},
        {DNNL_ARG_DIFF_SHIFT, wrap(channel_desc_, engine_, shift_gradient)}};
    if (p.relu_mask) arguments.emplace(DNNL_ARG_WORKSPACE, p.relu_mask);
    DLSCALE_DNNL_CHECK(p.backward.execute(stream_, arguments));
    stream_.wait();
  }

 private:
  struct Primitives {
    memory::desc data_desc;
    dnnl::batch_normalization_forward forward;
    dnnl::batch_normalization_backward backward;
    memory mean, variance;  // this batch's statistics, from forward to backward
    memory relu_mask;       // with a fused ReLU: where the output was positive
    std::vector<float> discarded_gradient;
  };

  Primitives& primitives_for(int batch) {
    return primitives_.get(batch, [&](int b) { return build(b); });
  }

  Primitives build(int batch) {
    Primitives p;
    p.data_desc = layouts_.describe(batch, geometry_.shape, geometry_.layout);
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (geometry_.relu) flags |= dnnl::normalization_flags::fuse_norm_relu;
    const auto forward_pd = DLSCALE_DNNL_CHECK(dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(prop_kind::forward_training, p.data_desc, epsilon,
                                                flags),
        engine_));
    const auto backward_pd = DLSCALE_DNNL_CHECK(dnnl::batch_normalization_backward::primitive_desc(
        dnnl::batch_normalization_backward::desc(prop_kind::backward, p.data_desc, p.data_desc,
                                                 epsilon, flags),
        engine_, forward_pd));
    require_address_space_for_a_primitive();
    p.forward = dnnl::batch_normalization_forward(forward_pd);
    p.backward = dnnl::batch_normalization_backward(backward_pd);
    p.mean = memory(forward_pd.mean_desc(), engine_);
    p.variance = memory(forward_pd.variance_desc(), engine_);
    if (geometry_.relu) p.relu_mask = memory(forward_pd.workspace_desc(), engine_);
    return p;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  DnnlImageLayouts layouts_;
  BatchNormGeometry geometry_;
  memory::desc channel_desc_;
  PrimitivesPerBatch<Primitives> primitives_;
};

}  // namespace

std::unique_ptr<BatchNormKernel> make_dnnl_batch_norm(const dnnl::engine& engine,
                                                      const dnnl::stream& stream,
                                                      const DnnlImageLayouts& layouts,
                                                      const BatchNormGeometry& geometry) {
  return std::make_unique<DnnlBatchNorm>(engine, stream, layouts, geometry);
}

std::unique_ptr<ConvolutionKernel> make_dnnl_convolution(const dnnl::engine& engine,
                                                         const dnnl::stream& stream,
                                                         const DnnlImageLayouts& layouts,
                                                         const ConvolutionGeometry& geometry,
                                                         memory::data_type inputs) {
  return std::make_unique<DnnlConvolution>(engine, stream, layouts, geometry, inputs);
}

std::unique_ptr<PoolingKernel> make_dnnl_pooling(const dnnl::engine& engine,
                                                 const dnnl::stream& stream,
                                                 const DnnlImageLayouts& layouts,
                                                 const PoolingGeometry& geometry) {
  return std::make_unique<DnnlPooling>(engine, stream, layouts, geometry);
}

}  // namespace dlscale::kernels
