// Convolution on cuDNN's graph API (DLSCALE_CUDNN_API=graph), through the cuDNN frontend: each
// pass (forward, backward data, backward filter) is a graph on packed NHWC tensors, its engines
// listed by cuDNN's heuristics (mode A, then the fallback list), built, timed once per layer
// shape and batch size on the layer's own buffers and the fastest kept, as PyTorch's
// cudnn.benchmark does. Choices are shared by every layer of the same shape on one device.
// Tensors the network holds in another order (the NCHW input data, OIHW weights, an output
// handed to a dense layer) or type (float under bf16) are converted into the device's staging
// memory around the call, so every engine sees the layout it is fastest on; the input's copy is
// the layer's own, kept from forward for the filter gradient. With bf16 images
// (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16) x, y and their gradients are the graphs' own operands and
// outputs, read and written where they lie: only weights, their gradient and a first layer's
// NCHW input are converted.
#include "kernels/cuda/cudnn_graph_convolution.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/channel_kernels.hpp"
#include "kernels/cuda/cudnn_frontend_check.hpp"
#include "kernels/cuda/cudnn_support.hpp"
#include "kernels/cuda/image_layout_conversion.hpp"

// The bias is added (when cuDNN offers no fused graph) and its gradient summed with the
// descriptor API, which cuDNN 9 marks deprecated yet ships throughout 9.x; silenced for this file
// as in cudnn_image_kernels.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace dlscale::kernels {

namespace fe = cudnn_frontend;

namespace {

const float one = 1.0f, zero = 0.0f;  // cuDNN's alpha and beta: host scalars

// The uids of the tensors in every graph's variant pack.
enum Uid : std::int64_t { x_uid = 1, w_uid, y_uid, bias_uid, dy_uid, dx_uid, dw_uid };

enum class Pass { forward, data, filter };
const char* pass_name(Pass pass) {
  return pass == Pass::forward ? "forward"
         : pass == Pass::data  ? "backward-data"
                               : "backward-filter";
}

// Engines timed per pass: the first this many that build, in heuristics order (PyTorch's
// cudnn.benchmark times up to 10 by default), of which at most runtime_compiled_limit compile
// their kernel at build time (NVRTC, up to seconds each: the fused graphs' engines mostly do).
// Each runs once untimed, then `timed_runs` times.
constexpr int candidate_limit = 8;
constexpr int runtime_compiled_limit = 2;
constexpr int timed_runs = 3;

// Dimensions in N, C, H, W order; packed NHWC strides for them (for weights: K, C, R, S and
// KRSC, the order cuDNN's NHWC engines want the filter in).
using Dims = std::vector<std::int64_t>;
Dims nhwc_strides(const Dims& d) { return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]}; }

// One way to state a pass as a graph (`choose` says which variants are timed):
//  - fuse_bias: forward writes conv(x, w) + bias in one graph (a pointwise add after the
//    convolution); otherwise the bias is added afterwards.
//  - fuse_relu: forward also applies the geometry's ReLU in the graph (a pointwise RELU_FWD after
//    the bias, so only with the bias fused or none); otherwise a kernel of dlscale's own applies
//    it afterwards, in the same pass as an unfused bias.
//  - float_output: the output (y, dx or dw) is written in float even from bf16 operands; otherwise
//    it is written in the operands' type and widened. With float operands both are float.
//  - deterministic: only engines without the NONDETERMINISTIC note, so reruns and replays repeat
//    bit for bit; an engine that sums with atomics is taken only where no other runs the pass.
struct Variant {
  bool fuse_bias = false;
  bool fuse_relu = false;
  bool float_output = true;
  bool deterministic = true;
};

// What was chosen for one pass of one shape: the graph, its engine (the plan index among the
// heuristics' candidates), the workspace that engine needs, and how it was stated.
struct PassChoice {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t engine = -1;
  std::size_t workspace_bytes = 0;
  Variant variant;
  std::string engine_name;
  float milliseconds = 0;  // of timed_runs runs, as timed in the search
  // What its search built: engines, and how many of them compiled a kernel (NVRTC) to do so.
  int engines_built = 0, runtime_compiled = 0;
  bool dynamic_shape = false;  // stated as a dynamic-shape graph (DLSCALE_CUDNN_KERNEL_CACHE)
};

using VariantPack = std::unordered_map<std::int64_t, void*>;

}  // namespace

// What the graph convolutions of one device share: the choices made for each shape (so a layer
// repeated 20 times in a ResNet is searched once). Their workspace is the device's one
// convolution workspace (CudaContext::convolution_workspace).
class ConvolutionGraphCache {
 public:
  std::map<std::string, PassChoice> choices;
  // Every variant the searches timed, by shape key and variant: the engines built and how many
  // of them were runtime-compiled (engines_built_per_search).
  std::map<std::string, std::pair<int, int>> searched;
  // Those of them that found an engine (variants_with_an_engine).
  std::set<std::string> found;
  // With DLSCALE_CUDNN_KERNEL_CACHE=yes, one cuDNN kernel cache per graph topology
  // (topology_key), shared by every shape of it; and per topology, how many graphs of it the
  // searches ran as dynamic-shape graphs (kernel_cache_use).
  std::map<std::string, std::shared_ptr<fe::KernelCache>> kernel_caches;
  std::map<std::string, int> dynamic_graphs;
};

std::shared_ptr<ConvolutionGraphCache> make_convolution_graph_cache() {
  return std::make_shared<ConvolutionGraphCache>();
}

std::map<std::string, std::pair<int, int>> engines_built_per_search(
    const ConvolutionGraphCache& cache) {
  return cache.searched;
}

std::set<std::string> variants_with_an_engine(const ConvolutionGraphCache& cache) {
  return cache.found;
}

std::map<std::string, int> kernel_cache_use(const ConvolutionGraphCache& cache) {
  return cache.dynamic_graphs;
}

namespace {

class CudnnGraphConvolution final : public ConvolutionKernel {
 public:
  CudnnGraphConvolution(const CudaContext& context, const ConvolutionGeometry& geometry)
      : context_(context),
        geometry_(geometry),
        in_bf16_(context.precision == Precision::bf16),
        operand_type_(in_bf16_ ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT),
        operand_bytes_(in_bf16_ ? sizeof(__nv_bfloat16) : sizeof(float)) {
    const auto& g = geometry_;
    if (g.groups < 1 || g.input.channels % g.groups != 0 || g.output_channels % g.groups != 0)
      throw std::invalid_argument("convolution: channels must divide into the groups");
    if (context.convolution_graphs == nullptr)
      throw std::logic_error("cuDNN graph convolution: the device made no graph cache");
    if (g.bias) describe_channels(bias_, g.output_channels);
  }

  void forward(int batch, const float* x, const float* weights, const float* bias,
               float* y) override {
    Plan& p = plan_for(batch);
    const auto [w_stage, y_stage] = context_.bf16_staging->byte_regions<2>(
        {staged_bytes(MemoryOrder::nchw, w_shape()),
         output_bf16() ? 0 : output_staging_bytes(output_order(), y_shape(batch))},
        context_.stream);
    const void* x_in = input_operand(p, batch, x);
    const void* w_in = operand(weights, MemoryOrder::nchw, w_stage, w_shape());
    const auto pack_for = [&](const Variant& v) {
      VariantPack pack{
          {x_uid, const_cast<void*>(x_in)},
          {w_uid, const_cast<void*>(w_in)},
          {y_uid, output_bf16() ? static_cast<void*>(y)
                                : output_target(v, y, output_order(), y_shape(batch), y_stage)}};
      if (v.fuse_bias) pack[bias_uid] = const_cast<float*>(bias);
      return pack;
    };
    // What a variant leaves to do after its graph: y moved out of staging, and without a fused
    // graph the bias broadcast over batch, height and width (y += bias, in float; on NHWC by a
    // kernel of dlscale's own: cuDNN's is slow there, channel_kernels.hpp), the ReLU in the
    // same pass where the bias is added on NHWC (element-wise, the ReLU alone does not care about
    // the layout). Timed with the graph in the search, so a variant pays for what it leaves.
    const auto complete = [&](const Variant& v) {
      if (!output_bf16()) finish_output(v, y_stage, y, output_order(), y_shape(batch));
      const bool bias_left = geometry_.bias && !v.fuse_bias;
      const bool relu_left = geometry_.relu && !v.fuse_relu;
      const bool nhwc = lies_as_nhwc(output_order(), y_shape(batch));
      if (bias_left && !nhwc)
        DLSCALE_CUDNN_CHECK(cudnnAddTensor(context_.cudnn, &one, bias_, bias, &one, p.output, y));
      if ((bias_left && nhwc) || relu_left) {
        const float* channel_bias = bias_left && nhwc ? bias : nullptr;
        if (output_bf16())
          add_channel_bias(reinterpret_cast<__nv_bfloat16*>(y), channel_bias, relu_left,
                           pixel_rows(batch), geometry_.output_channels, context_.stream);
        else
          add_channel_bias(y, channel_bias, relu_left, pixel_rows(batch), geometry_.output_channels,
                           context_.stream);
      }
    };
    const PassChoice& choice = choose(p.forward, Pass::forward, batch, pack_for, complete);
    execute(choice, pack_for(choice.variant));
    complete(choice.variant);
  }

  void backward(int batch, const float* x, const float* weights, const float* y,
                const float* output_gradient, float* input_gradient, float* weight_gradient,
                float* bias_gradient) override {
    Plan& p = plan_for(batch);
    const bool data_wanted = input_gradient != nullptr;  // not for a network's first layer
    const auto [dy_stage, w_stage, dw_stage, dx_stage] = context_.bf16_staging->byte_regions<4>(
        {output_gradient_staging_bytes(batch),
         data_wanted ? staged_bytes(MemoryOrder::nchw, w_shape()) : 0,
         output_staging_bytes(MemoryOrder::nchw, w_shape()),
         data_wanted && !input_bf16() ? output_staging_bytes(input_order(), x_shape(batch)) : 0},
        context_.stream);
    // x as forward converted it (the same x, by the kernel's contract): no second pass over it.
    const void* x_in = p.input_operand.size() > 0 ? p.input_operand.data() : x;
    const void* dy_in =
        output_gradient_operand(p, batch, y, output_gradient, dy_stage, bias_gradient);

    const auto filter_pack_for = [&](const Variant& v) {
      return VariantPack{
          {x_uid, const_cast<void*>(x_in)},
          {dy_uid, const_cast<void*>(dy_in)},
          {dw_uid, output_target(v, weight_gradient, MemoryOrder::nchw, w_shape(), dw_stage)}};
    };
    const auto filter_complete = [&](const Variant& v) {
      finish_output(v, dw_stage, weight_gradient, MemoryOrder::nchw, w_shape());
    };
    const PassChoice& filter =
        choose(p.filter, Pass::filter, batch, filter_pack_for, filter_complete);
    execute(filter, filter_pack_for(filter.variant));
    filter_complete(filter.variant);

    if (!data_wanted) return;
    const void* w_in = operand(weights, MemoryOrder::nchw, w_stage, w_shape());
    const auto data_pack_for = [&](const Variant& v) {
      return VariantPack{{dy_uid, const_cast<void*>(dy_in)},
                         {w_uid, const_cast<void*>(w_in)},
                         {dx_uid, input_bf16() ? static_cast<void*>(input_gradient)
                                               : output_target(v, input_gradient, input_order(),
                                                               x_shape(batch), dx_stage)}};
    };
    const auto data_complete = [&](const Variant& v) {
      if (!input_bf16()) finish_output(v, dx_stage, input_gradient, input_order(), x_shape(batch));
    };
    const PassChoice& data = choose(p.data, Pass::data, batch, data_pack_for, data_complete);
    execute(data, data_pack_for(data.variant));
    data_complete(data.variant);
  }

 private:
  // What one batch size needs: each pass's choice (made on its first call, shared through the
  // device's cache) and y's descriptor, in its layout, for the bias.
  struct Plan {
    const PassChoice* forward = nullptr;
    const PassChoice* data = nullptr;
    const PassChoice* filter = nullptr;
    TensorDescriptor output;
    DeviceBuffer bias_scratch;  // the bias gradient's partial sums, on NHWC
    // x as the graphs read it (NHWC, in the operand type), converted by forward and read again
    // by the filter pass; empty where the graphs read the network's x itself (float NHWC, or
    // bf16 images). Kept per layer, as PyTorch keeps a bf16 convolution's input for its backward
    // under autocast.
    DeviceBuffer input_operand;
    DeviceBuffer relu_gradient;  // a fused ReLU's masked gradient where y is NCHW, float
  };

  Plan& plan_for(int batch) {
    return plan_of(plans_, batch, context_.stream, "cuDNN graph convolution", [&](Plan& p) {
      describe_images(p.output, batch, geometry_.output(), output_nhwc());
      const bool output_nhwc = lies_as_nhwc(output_order(), y_shape(batch));
      if (geometry_.bias && output_nhwc)
        p.bias_scratch =
            DeviceBuffer(channel_sums_scratch_bytes(pixel_rows(batch), geometry_.output_channels));
      if (!input_bf16())
        p.input_operand = DeviceBuffer(staged_bytes(input_order(), x_shape(batch)));
      if (geometry_.relu && !output_nhwc)
        p.relu_gradient = DeviceBuffer(y_shape(batch).size() * sizeof(float));
    });
  }

  // Rows of the output seen as an NHWC [pixels x channels] matrix.
  std::int64_t pixel_rows(int batch) const {
    const ImageShape out = geometry_.output();
    return std::int64_t(batch) * out.height * out.width;
  }

  // --- Layouts and staging --------------------------------------------------------------------

  bool input_nhwc() const {
    return geometry_.input_layout == ImageLayout::native && context_.native_is_nhwc();
  }
  bool output_nhwc() const {
    return geometry_.output_layout == ImageLayout::native && context_.native_is_nhwc();
  }
  MemoryOrder input_order() const { return input_nhwc() ? MemoryOrder::nhwc : MemoryOrder::nchw; }
  // bf16 images (CudaContext::native_is_bf16): x and dx, or y and dy, are NHWC bf16 already, so
  // the graphs read them and write them where they lie, and nothing is converted around them.
  bool input_bf16() const { return input_nhwc() && context_.native_is_bf16(); }
  bool output_bf16() const { return output_nhwc() && context_.native_is_bf16(); }
  // Whether the pass's output (y forward, dx backward-data) is a bf16 image.
  bool writes_bf16_image(Pass pass) const {
    return (pass == Pass::forward && output_bf16()) || (pass == Pass::data && input_bf16());
  }
  MemoryOrder output_order() const { return output_nhwc() ? MemoryOrder::nhwc : MemoryOrder::nchw; }

  ImageBatchShape x_shape(int batch) const {
    return {batch, geometry_.input.channels, geometry_.input.height, geometry_.input.width};
  }
  ImageBatchShape y_shape(int batch) const {
    const ImageShape out = geometry_.output();
    return {batch, out.channels, out.height, out.width};
  }
  // OIHW as an NCHW batch: N = output channels, C = input channels per group.
  ImageBatchShape w_shape() const {
    return {geometry_.output_channels, geometry_.input.channels / geometry_.groups,
            geometry_.kernel, geometry_.kernel};
  }

  // Whether a tensor in `order` already lies as packed NHWC (as one channel or one pixel does in
  // either order).
  static bool lies_as_nhwc(MemoryOrder order, const ImageBatchShape& shape) {
    return order == MemoryOrder::nhwc || orders_agree(shape);
  }

  // Bytes of staging an input operand needs: none where the network's float tensor already is
  // what the graph reads (float operands, packed NHWC).
  std::size_t staged_bytes(MemoryOrder order, const ImageBatchShape& shape) const {
    return !in_bf16_ && lies_as_nhwc(order, shape) ? 0 : shape.size() * operand_bytes_;
  }
  // Staging for an output, large enough for float (a variant may write float or bf16): none
  // where a float output can go straight into the network's tensor.
  std::size_t output_staging_bytes(MemoryOrder order, const ImageBatchShape& shape) const {
    return !in_bf16_ && lies_as_nhwc(order, shape) ? 0 : shape.size() * sizeof(float);
  }

  // The operand as the graph reads it: the network's tensor itself, or its NHWC copy in the
  // operand type, converted into `stage`.
  const void* operand(const float* tensor, MemoryOrder order, std::byte* stage,
                      const ImageBatchShape& shape) const {
    if (!in_bf16_ && lies_as_nhwc(order, shape)) return tensor;
    if (in_bf16_)
      convert_images(tensor, order, reinterpret_cast<__nv_bfloat16*>(stage), MemoryOrder::nhwc,
                     shape, context_.stream);
    else
      convert_images(tensor, order, reinterpret_cast<float*>(stage), MemoryOrder::nhwc, shape,
                     context_.stream);
    return stage;
  }

  // x as the graphs read it: the network's tensor, or its copy converted into the plan's buffer.
  const void* input_operand(Plan& p, int batch, const float* x) const {
    if (input_bf16() || p.input_operand.size() == 0) return x;
    return operand(x, input_order(), p.input_operand.as<std::byte>(), x_shape(batch));
  }

  // Staging the output gradient needs: the operand-type NHWC copy that the pass preparing it
  // writes, or none where the graphs read the network's float NHWC dy as it is.
  std::size_t output_gradient_staging_bytes(int batch) const {
    const ImageBatchShape shape = y_shape(batch);
    if (output_bf16()) return geometry_.relu ? shape.size() * sizeof(__nv_bfloat16) : 0;
    if (lies_as_nhwc(output_order(), shape) && !in_bf16_ && !geometry_.relu) return 0;
    return shape.size() * operand_bytes_;
  }

  // The output gradient as the backward graphs read it, and the bias gradient. Where dy lies as
  // NHWC, one pass (prepare_output_gradient) masks it by a fused ReLU's y, writes the operand
  // copy and sums the bias gradient in float before rounding: the mask, the bias gradient and
  // the rounding were three passes over dy, two of them over float. Otherwise (an output handed
  // to a dense layer, NCHW) the mask is a pass of its own and the rest as in the legacy path.
  const void* output_gradient_operand(Plan& p, int batch, const float* y, const float* dy,
                                      std::byte* stage, float* bias_gradient) {
    const ImageBatchShape shape = y_shape(batch);
    const float* relu_output = geometry_.relu ? y : nullptr;
    const int channels = geometry_.output_channels;
    if (lies_as_nhwc(output_order(), shape)) {
      float* sums = geometry_.bias ? bias_gradient : nullptr;
      void* scratch = p.bias_scratch.data();
      if (output_bf16()) {  // dy is the bf16 operand already: only masked where there is a ReLU
        const auto* dy_bf16 = reinterpret_cast<const __nv_bfloat16*>(dy);
        if (!geometry_.relu) {
          if (sums != nullptr)
            sum_channels(dy_bf16, pixel_rows(batch), channels, sums, scratch, context_.stream);
          return dy;
        }
        prepare_output_gradient(dy_bf16, reinterpret_cast<const __nv_bfloat16*>(y),
                                reinterpret_cast<__nv_bfloat16*>(stage), pixel_rows(batch),
                                channels, sums, scratch, context_.stream);
        return stage;
      }
      if (output_gradient_staging_bytes(batch) == 0) {
        if (sums != nullptr)
          sum_channels(dy, pixel_rows(batch), channels, sums, scratch, context_.stream);
        return dy;
      }
      if (in_bf16_)
        prepare_output_gradient<float, __nv_bfloat16>(
            dy, relu_output, reinterpret_cast<__nv_bfloat16*>(stage), pixel_rows(batch), channels,
            sums, scratch, context_.stream);
      else
        prepare_output_gradient<float, float>(dy, relu_output, reinterpret_cast<float*>(stage),
                                              pixel_rows(batch), channels, sums, scratch,
                                              context_.stream);
      return stage;
    }
    if (relu_output != nullptr) {
      float* masked = p.relu_gradient.as<float>();
      prepare_output_gradient<float, float>(dy, relu_output, masked, std::int64_t(shape.size()), 1,
                                            nullptr, nullptr, context_.stream);
      dy = masked;
    }
    if (geometry_.bias)
      DLSCALE_CUDNN_CHECK(cudnnConvolutionBackwardBias(context_.cudnn, &one, p.output, dy, &zero,
                                                       bias_, bias_gradient));
    return operand(dy, output_order(), stage, shape);
  }

  // Where the graph writes an output: the network's float tensor itself where the variant writes
  // float and the tensor is (or reads as) NHWC, else the staging region.
  static void* output_target(const Variant& v, float* tensor, MemoryOrder order,
                             const ImageBatchShape& shape, std::byte* stage) {
    return v.float_output && lies_as_nhwc(order, shape) ? static_cast<void*>(tensor) : stage;
  }
  // Moves an output written into staging to the network's tensor: to its order, and to float.
  void finish_output(const Variant& v, std::byte* stage, float* tensor, MemoryOrder order,
                     const ImageBatchShape& shape) const {
    if (v.float_output && lies_as_nhwc(order, shape)) return;  // written in place
    if (v.float_output)
      convert_images(reinterpret_cast<const float*>(stage), MemoryOrder::nhwc, tensor, order, shape,
                     context_.stream);
    else
      convert_images(reinterpret_cast<const __nv_bfloat16*>(stage), MemoryOrder::nhwc, tensor,
                     order, shape, context_.stream);
  }

  // --- Graphs -----------------------------------------------------------------------------------

  std::vector<Variant> variants(Pass pass) const {
    std::vector<Variant> result;
    const bool forward = pass == Pass::forward;
    // Outputs that are bf16 images are written in bf16 where they lie.
    const bool bf16_output_only = writes_bf16_image(pass);
    for (const bool fuse_bias : {true, false}) {
      if (fuse_bias && !(forward && geometry_.bias)) continue;
      for (const bool fuse_relu : {true, false}) {
        // The ReLU follows the bias: fused only after a fused bias, or where there is none.
        if (fuse_relu && !(forward && geometry_.relu && (fuse_bias || !geometry_.bias))) continue;
        for (const bool float_output : {true, false}) {
          if ((!float_output && !in_bf16_) || (float_output && bf16_output_only)) continue;
          for (const bool deterministic : {true, false})
            result.push_back({fuse_bias, fuse_relu, float_output, deterministic});
        }
      }
    }
    return result;
  }

  // The variants the search times, in order: all of them; with DLSCALE_CUDNN_PRUNED_SEARCH=yes
  // the filter gradient's bf16-writing variants before its float-writing ones, so that
  // `skipped_for` can leave the latter out where the former found an engine.
  std::vector<Variant> searched_variants(Pass pass) const {
    std::vector<Variant> result = variants(pass);
    if (context_.pruned_search && pass == Pass::filter)
      std::stable_partition(result.begin(), result.end(),
                            [](const Variant& v) { return !v.float_output; });
    return result;
  }

  // With DLSCALE_CUDNN_PRUNED_SEARCH=yes, what makes the search skip `v` (cuda_context.hpp):
  // which variant already timed with an engine stands for it; null where `v` is timed.
  //  - The forward graph fusing the bias but not the ReLU, where the one fusing both found an
  //    engine: it computes the same and leaves the ReLU a pass of its own.
  //  - Under bf16, the filter gradient written in float, where the same graph written in bf16
  //    found an engine: what the float one saves is widening dw, a pass over the weights only.
  const char* skipped_for(Pass pass, const Variant& v,
                          const std::vector<Variant>& with_engine) const {
    if (!context_.pruned_search) return nullptr;
    for (const Variant& found : with_engine) {
      if (found.deterministic != v.deterministic) continue;
      if (pass == Pass::forward && v.fuse_bias && !v.fuse_relu && geometry_.relu &&
          found.fuse_bias && found.fuse_relu && found.float_output == v.float_output)
        return "the graph fusing the bias and the ReLU";
      if (pass == Pass::filter && in_bf16_ && v.float_output && !found.float_output &&
          found.fuse_bias == v.fuse_bias && found.fuse_relu == v.fuse_relu)
        return "the graph writing dw in bf16";
    }
    return nullptr;
  }

  // The pass as a graph, its heuristics' engines listed and filtered; null, with `why`, where
  // cuDNN cannot state it so. `dynamic`: as a dynamic-shape graph with its topology's kernel
  // cache (DLSCALE_CUDNN_KERNEL_CACHE).
  std::shared_ptr<fe::graph::Graph> make_graph(Pass pass, int batch, const Variant& v, bool dynamic,
                                               std::string& why) const {
    const auto& g = geometry_;
    const ImageShape out = g.output();
    const Dims x_dims{batch, g.input.channels, g.input.height, g.input.width};
    const Dims w_dims{g.output_channels, g.input.channels / g.groups, g.kernel, g.kernel};
    const Dims y_dims{batch, out.channels, out.height, out.width};
    const std::vector<std::int64_t> padding{g.padding, g.padding}, stride{g.stride, g.stride},
        dilation{1, 1};
    const fe::DataType_t output_type = v.float_output ? fe::DataType_t::FLOAT : operand_type_;

    auto graph = std::make_shared<fe::graph::Graph>();
    // Products of bf16 (or float) operands summed in float; intermediates between fused
    // operations in float.
    graph->set_io_data_type(operand_type_)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    if (dynamic) {
      std::shared_ptr<fe::KernelCache>& cache =
          context_.convolution_graphs->kernel_caches[topology_key(pass, v)];
      if (cache == nullptr) cache = std::make_shared<fe::KernelCache>();
      graph->set_dynamic_shape_enabled(true).set_kernel_cache(cache);
    }
    const auto tensor = [&](const char* name, Uid uid, const Dims& dims) {
      return graph->tensor(fe::graph::Tensor_attributes()
                               .set_name(name)
                               .set_uid(uid)
                               .set_dim(dims)
                               .set_stride(nhwc_strides(dims))
                               .set_data_type(operand_type_));
    };
    // Groups are implied, as cuDNN's graph API has them: the filter's C is the input's C / groups.
    std::shared_ptr<fe::graph::Tensor_attributes> result;
    Uid result_uid = y_uid;
    Dims result_dims;
    switch (pass) {
      case Pass::forward: {
        result = graph->conv_fprop(tensor("x", x_uid, x_dims), tensor("w", w_uid, w_dims),
                                   fe::graph::Conv_fprop_attributes()
                                       .set_name("forward")
                                       .set_padding(padding)
                                       .set_stride(stride)
                                       .set_dilation(dilation));
        if (v.fuse_bias) {
          const auto bias = graph->tensor(
              fe::graph::Tensor_attributes()
                  .set_name("bias")
                  .set_uid(bias_uid)
                  .set_dim({1, g.output_channels, 1, 1})
                  .set_stride({g.output_channels, 1, g.output_channels, g.output_channels})
                  .set_data_type(fe::DataType_t::FLOAT));
          result = graph->pointwise(result, bias,
                                    fe::graph::Pointwise_attributes()
                                        .set_name("add_bias")
                                        .set_mode(fe::PointwiseMode_t::ADD)
                                        .set_compute_data_type(fe::DataType_t::FLOAT));
        }
        if (v.fuse_relu)
          result = graph->pointwise(result, fe::graph::Pointwise_attributes()
                                                .set_name("relu")
                                                .set_mode(fe::PointwiseMode_t::RELU_FWD)
                                                .set_compute_data_type(fe::DataType_t::FLOAT));
        result_uid = y_uid;
        result_dims = y_dims;
        break;
      }
      case Pass::data:
        result = graph->conv_dgrad(tensor("dy", dy_uid, y_dims), tensor("w", w_uid, w_dims),
                                   fe::graph::Conv_dgrad_attributes()
                                       .set_name("backward_data")
                                       .set_padding(padding)
                                       .set_stride(stride)
                                       .set_dilation(dilation));
        result_uid = dx_uid;
        result_dims = x_dims;
        break;
      case Pass::filter:
        result = graph->conv_wgrad(tensor("dy", dy_uid, y_dims), tensor("x", x_uid, x_dims),
                                   fe::graph::Conv_wgrad_attributes()
                                       .set_name("backward_filter")
                                       .set_padding(padding)
                                       .set_stride(stride)
                                       .set_dilation(dilation));
        result_uid = dw_uid;
        result_dims = w_dims;
        break;
    }
    result->set_output(true)
        .set_uid(result_uid)
        .set_dim(result_dims)
        .set_stride(nhwc_strides(result_dims))
        .set_data_type(output_type);

    const auto failed = [&](fe::error_t status) {
      if (status.is_good()) return false;
      why = status.get_message();
      return true;
    };
    if (failed(graph->validate()) || failed(graph->build_operation_graph(context_.cudnn)) ||
        failed(graph->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})))
      return nullptr;
    // The numerics each precision allows, as PyTorch filters cuDNN's engines: never inputs
    // converted down (to fp16) or sums reduced in less than float; under fp32 no tensor cores
    // (on float tensors they mean TF32 products); tf32 and bf16 take them.
    std::vector<fe::NumericalNote_t> barred{fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
                                            fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION};
    if (context_.precision == Precision::fp32) barred.push_back(fe::NumericalNote_t::TENSOR_CORE);
    if (v.deterministic) barred.push_back(fe::NumericalNote_t::NONDETERMINISTIC);
    graph->deselect_numeric_notes(barred);
    // The workspace limit, or a quarter of what is free if that is less (the legacy search's
    // bound): the candidates are timed with a scratch buffer as large as the largest of them.
    std::size_t free_bytes = 0, total_bytes = 0;
    DLSCALE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    graph->deselect_workspace_greater_than(
        std::int64_t(std::min(context_.convolution_workspace_limit, free_bytes / 4)));
    return graph;
  }

  // What two graphs must share for one kernel cache to serve both (DLSCALE_CUDNN_KERNEL_CACHE):
  // everything make_graph states but the tensors' sizes. Grouping is one, all channels (a
  // depthwise convolution) or a count.
  std::string topology_key(Pass pass, const Variant& v) const {
    const auto& g = geometry_;
    const bool depthwise = g.groups > 1 && g.groups == g.input.channels;
    return fmt::format("{} k{} s{} p{} {} {}: fuse_bias {} fuse_relu {} float_output {}",
                       pass_name(pass), g.kernel, g.stride, g.padding,
                       depthwise ? std::string("depthwise") : fmt::format("g{}", g.groups),
                       precision_name(context_.precision), int(v.fuse_bias), int(v.fuse_relu),
                       int(v.float_output));
  }

  std::string shape_key(Pass pass, int batch) const {
    const auto& g = geometry_;
    // Where the pass writes a bf16 image, only its bf16-writing variants are candidates.
    const bool bf16_image_output = writes_bf16_image(pass);
    return fmt::format("{} {}x{}x{} -> {} k{} s{} p{} g{} bias{} relu{} batch{} {}{}",
                       pass_name(pass), g.input.channels, g.input.height, g.input.width,
                       g.output_channels, g.kernel, g.stride, g.padding, g.groups, int(g.bias),
                       int(g.relu && pass == Pass::forward), batch,
                       precision_name(context_.precision), bf16_image_output ? " bf16-image" : "");
  }

  // The pass's choice for this batch size: the cached one of the same shape, or made now. Every
  // deterministic variant's engines are timed and the fastest kept: under bf16 the graphs that
  // write bf16 run on other engines than those that write float, up to 35 times faster (H200,
  // vgg-16's first layers' filter gradient, docs/gpu.md). Only where no deterministic engine
  // runs the pass are the non-deterministic variants tried, in order. Unlike the legacy search, a
  // non-deterministic engine is never taken for speed: on the H200 none was more than 1% faster
  // than the deterministic one for vgg-16's shapes, and with them a replayed step would not
  // repeat its results bit for bit. `pack_for` gives the buffers a variant runs on, and
  // `complete` queues what the variant leaves to do after its graph (moving its output out of
  // staging, the bias and ReLU it did not fuse): each engine is timed with it, as the call runs
  // it. Timing writes the pass's output, which the call then overwrites.
  template <typename PackFor, typename Complete>
  const PassChoice& choose(const PassChoice*& slot, Pass pass, int batch, PackFor&& pack_for,
                           Complete&& complete) {
    if (slot != nullptr) return *slot;
    auto& choices = context_.convolution_graphs->choices;
    const std::string key = shape_key(pass, batch);
    if (const auto found = choices.find(key); found != choices.end())
      return *(slot = &found->second);
    require_not_capturing(context_.stream, "cuDNN graph convolution engine search");
    std::string why = "no variant of the graph was tried";
    // The search's own cost (building engines, runtime-compiled ones above all, and timing them)
    // is paid once per shape, in the first step: printed with the choices, for profiles.
    const auto search_start = std::chrono::steady_clock::now();
    const auto seconds_since = [](std::chrono::steady_clock::time_point start) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    const auto timed = [&](const Variant& v) {
      const auto start = std::chrono::steady_clock::now();
      PassChoice choice;
      if (auto graph = make_graph(pass, batch, v, context_.kernel_cache, why); graph != nullptr)
        choice = fastest_engine(
            std::move(graph), pack_for(v), [&] { complete(v); }, why);
      choice.dynamic_shape = context_.kernel_cache && choice.engine >= 0;
      if (choice.dynamic_shape)
        ++context_.convolution_graphs->dynamic_graphs[topology_key(pass, v)];
      // A dynamic-shape graph may be offered no engine where a static one is: then the static.
      if (choice.engine < 0 && context_.kernel_cache)
        if (auto graph = make_graph(pass, batch, v, false, why); graph != nullptr)
          choice = fastest_engine(
              std::move(graph), pack_for(v), [&] { complete(v); }, why);
      choice.variant = v;
      const std::string searched_key = fmt::format(
          "{}: fuse_bias {} fuse_relu {} float_output {} deterministic {}", key, int(v.fuse_bias),
          int(v.fuse_relu), int(v.float_output), int(v.deterministic));
      context_.convolution_graphs->searched[searched_key] = {choice.engines_built,
                                                             choice.runtime_compiled};
      if (choice.engine >= 0) context_.convolution_graphs->found.insert(searched_key);
      if (cudnn_search_verbose())
        std::fprintf(stderr,
                     "dlscale: cuDNN graph: %s: fuse_bias %d fuse_relu %d float_output %d "
                     "deterministic %d: %s %.4f ms (%d engines built, %d runtime-compiled, "
                     "%.2f s%s)\n",
                     key.c_str(), int(v.fuse_bias), int(v.fuse_relu), int(v.float_output),
                     int(v.deterministic),
                     choice.engine < 0 ? "no engine" : choice.engine_name.c_str(),
                     double(choice.milliseconds), choice.engines_built, choice.runtime_compiled,
                     seconds_since(start),
                     !context_.kernel_cache ? ""
                     : choice.dynamic_shape ? ", dynamic shape"
                                            : ", static shape");
      return choice;
    };
    PassChoice best;
    std::vector<Variant> with_engine;  // the variants timed so far that found an engine
    for (const Variant& v : searched_variants(pass)) {
      if (!v.deterministic) continue;
      if (const char* dominated_by = skipped_for(pass, v, with_engine)) {
        if (cudnn_search_verbose())
          std::fprintf(stderr,
                       "dlscale: cuDNN graph: %s: fuse_bias %d fuse_relu %d float_output %d "
                       "deterministic %d: skipped (DLSCALE_CUDNN_PRUNED_SEARCH: %s found an "
                       "engine)\n",
                       key.c_str(), int(v.fuse_bias), int(v.fuse_relu), int(v.float_output),
                       int(v.deterministic), dominated_by);
        continue;
      }
      PassChoice choice = timed(v);
      if (choice.engine >= 0) with_engine.push_back(v);
      if (choice.engine >= 0 && (best.engine < 0 || choice.milliseconds < best.milliseconds))
        best = std::move(choice);
    }
    if (best.engine < 0) {
      for (const Variant& v : variants(pass)) {
        if (v.deterministic) continue;
        if (best = timed(v); best.engine >= 0) break;
      }
    }
    if (best.engine < 0)
      throw std::runtime_error(
          fmt::format("cuDNN graph API: no engine runs the {} convolution ({}): {}{}",
                      pass_name(pass), shape_key(pass, batch), why,
                      writes_bf16_image(pass)
                          ? " (it writes a bf16 image: DLSCALE_CUDA_IMAGE_ACTIVATIONS=float "
                            "writes float images, which more engines do)"
                          : ""));
    if (cudnn_search_verbose())
      std::fprintf(stderr, "dlscale: cuDNN graph: %s: search took %.2f s\n", key.c_str(),
                   seconds_since(search_start));
    return *(slot = &choices.emplace(key, std::move(best)).first->second);
  }

  // The engines of the graph that the search times, built: the first candidate_limit in
  // heuristics order that build, at most runtime_compiled_limit of them compiled with NVRTC (the
  // later ones that would compile are skipped). With DLSCALE_CUDNN_BUILD_THREADS=N above 1 they
  // are built N at a time, each on a thread of its own, as the cuDNN frontend's
  // parallel_compilation sample builds the plans of one graph: NVRTC's compiles and cuDNN's
  // finalisation are host work that one thread otherwise pays one after another. Each round takes
  // the next indices in order, as many as slots remain and threads allow, and ends before a
  // runtime-compiled one that this round's own could push past the limit (it is considered again
  // once they are built or failed), so the engines built, and so the engine chosen, are those of
  // one thread. A failure is kept in `why`, in heuristics order.
  std::vector<std::int64_t> build_candidates(fe::graph::Graph& graph, int& runtime_compiled,
                                             std::string& why) const {
    const std::int64_t count = graph.get_execution_plan_count();
    // With the kernel cache, one at a time: builders would fill one cache at once, which cuDNN
    // does not document as safe.
    const int threads = context_.kernel_cache ? 1 : std::max(1, context_.engine_build_threads);
    std::vector<std::int64_t> built;
    runtime_compiled = 0;
    std::int64_t next = 0;
    while (next < count && std::ssize(built) < candidate_limit) {
      struct Candidate {
        std::int64_t index;
        bool compiles;
        fe::error_t status;
        std::exception_ptr thrown;
      };
      std::vector<Candidate> round;
      int compiling = runtime_compiled;  // built, and in this round
      const int slots = std::min(int(candidate_limit - std::ssize(built)), threads);
      for (; next < count && std::ssize(round) < slots; ++next) {
        std::vector<fe::BehaviorNote_t> notes;
        DLSCALE_CUDNN_FRONTEND_CHECK(graph.get_behavior_notes_for_plan_at_index(next, notes));
        const bool compiles = std::find(notes.begin(), notes.end(),
                                        fe::BehaviorNote_t::RUNTIME_COMPILATION) != notes.end();
        if (compiles && runtime_compiled >= runtime_compiled_limit) continue;  // never
        if (compiles && compiling >= runtime_compiled_limit) break;            // after this round
        compiling += compiles;
        round.push_back({next, compiles, {}, nullptr});
      }
      // Each candidate built alike, inline or on a thread of its own: a thread first makes the
      // context's GPU its current device (a new thread's is device 0, another rank's GPU on a
      // node of several), and whatever a build throws is kept and thrown again after the
      // round, in heuristics order, as one thread's search would have thrown it.
      const auto build = [&graph, device = context_.device](Candidate& candidate, bool on_thread) {
        try {
          if (on_thread) DLSCALE_CUDA_CHECK(cudaSetDevice(device));
          candidate.status = graph.build_plan_at_index(candidate.index);
        } catch (...) {
          candidate.thrown = std::current_exception();
        }
      };
      if (round.size() == 1) {
        build(round[0], false);
      } else {
        // jthreads join when destroyed, also where starting a later one throws.
        std::vector<std::jthread> builders;
        builders.reserve(round.size());
        for (Candidate& candidate : round) builders.emplace_back(build, std::ref(candidate), true);
      }
      for (const Candidate& candidate : round)
        if (candidate.thrown) std::rethrow_exception(candidate.thrown);
      for (Candidate& candidate : round) {
        if (candidate.status.is_bad()) {
          why = candidate.status.get_message();
          continue;
        }
        built.push_back(candidate.index);
        runtime_compiled += candidate.compiles;
      }
    }
    return built;
  }

  // Builds up to candidate_limit of the graph's engines (in heuristics order, skipping those the
  // filters barred, runtime-compiled ones past runtime_compiled_limit, and any that fail to
  // build), runs each once, then times `timed_runs` runs of each with CUDA events on the stream,
  // each run followed by `after` (what the variant leaves to do), and keeps the fastest.
  // engine = -1 where none ran.
  PassChoice fastest_engine(std::shared_ptr<fe::graph::Graph> graph, const VariantPack& pack,
                            const std::function<void()>& after, std::string& why) {
    int runtime_compiled = 0;
    const std::vector<std::int64_t> built = build_candidates(*graph, runtime_compiled, why);
    std::size_t largest_workspace = 0;
    for (const std::int64_t engine : built) {
      std::int64_t workspace_bytes = 0;
      DLSCALE_CUDNN_FRONTEND_CHECK(
          graph->get_workspace_size_plan_at_index(engine, workspace_bytes));
      largest_workspace = std::max(largest_workspace, std::size_t(workspace_bytes));
    }
    PassChoice best;
    best.engines_built = int(built.size());
    best.runtime_compiled = runtime_compiled;
    if (built.empty()) return best;
    const DeviceBuffer scratch(largest_workspace);
    cudaEvent_t start = nullptr, stop = nullptr;
    DLSCALE_CUDA_CHECK(cudaEventCreate(&start));
    DLSCALE_CUDA_CHECK(cudaEventCreate(&stop));
    float best_milliseconds = std::numeric_limits<float>::infinity();
    for (const std::int64_t engine : built) {
      VariantPack run_pack = pack;
      if (auto status =
              graph->execute_plan_at_index(context_.cudnn, run_pack, scratch.data(), engine);
          status.is_bad()) {
        why = status.get_message();
        continue;
      }
      after();
      DLSCALE_CUDA_CHECK(cudaEventRecord(start, context_.stream));
      for (int run = 0; run < timed_runs; ++run) {
        run_pack = pack;
        DLSCALE_CUDNN_FRONTEND_CHECK(
            graph->execute_plan_at_index(context_.cudnn, run_pack, scratch.data(), engine));
        after();
      }
      DLSCALE_CUDA_CHECK(cudaEventRecord(stop, context_.stream));
      DLSCALE_CUDA_CHECK(cudaEventSynchronize(stop));
      float milliseconds = 0;
      DLSCALE_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start, stop));
      if (milliseconds < best_milliseconds) {
        best_milliseconds = milliseconds;
        best.engine = engine;
      }
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (best.engine < 0) return best;
    best.milliseconds = best_milliseconds;
    std::int64_t workspace_bytes = 0;
    DLSCALE_CUDNN_FRONTEND_CHECK(
        graph->get_workspace_size_plan_at_index(best.engine, workspace_bytes));
    best.workspace_bytes = std::size_t(workspace_bytes);
    DLSCALE_CUDNN_FRONTEND_CHECK(graph->get_plan_name_at_index(best.engine, best.engine_name));
    best.graph = std::move(graph);
    return best;
  }

  void execute(const PassChoice& choice, VariantPack pack) {
    void* workspace = context_.convolution_workspace->get(choice.workspace_bytes, context_.stream);
    DLSCALE_CUDNN_FRONTEND_CHECK(
        choice.graph->execute_plan_at_index(context_.cudnn, pack, workspace, choice.engine));
  }

  CudaContext context_;
  ConvolutionGeometry geometry_;
  bool in_bf16_;                 // --precision bf16: the graphs read bf16 operands
  fe::DataType_t operand_type_;  // of x, w and dy as the graphs read them
  std::size_t operand_bytes_;    // their size
  TensorDescriptor bias_;
  std::map<int, Plan> plans_;  // by batch size
};

}  // namespace

std::unique_ptr<ConvolutionKernel> make_cudnn_graph_convolution(
    const CudaContext& context, const ConvolutionGeometry& geometry) {
  open_cudnn_for_the_frontend();
  return std::make_unique<CudnnGraphConvolution>(context, geometry);
}

}  // namespace dlscale::kernels

#pragma GCC diagnostic pop
