// cuDNN convolution, pooling and batch normalization, on cuDNN's descriptor API in float. The
// convolution here is the legacy path (DLSCALE_CUDNN_API=legacy) and runs in NCHW, this device's
// native layout there; pooling and batch norm serve both paths and describe each tensor in its
// layout, NCHW or NHWC (native under DLSCALE_CUDNN_API=graph). Everything a batch size
// needs (descriptors, algorithms, workspaces) is made on its first call, which runs eagerly; every
// later call only queues work on the context's stream, so a step can be captured as a CUDA graph.
// Under --precision bf16 convolutions run on bf16 copies of their float operands and widen what
// they write to float; pooling and batch normalization stay float, as under PyTorch's autocast.
#include "kernels/cuda/cudnn_image_kernels.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/channel_kernels.hpp"
#include "kernels/cuda/cudnn_support.hpp"
#include "kernels/cuda/image_layout_conversion.hpp"

// cuDNN 9 marks this whole descriptor API deprecated in favour of its graph API, yet ships and
// supports it throughout 9.x (the GPU machines run 9.14). The attribute only fires in builds that
// define CUDNN_WARN_DEPRECATED; it is silenced here, for this file only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace dlscale::kernels {

namespace {

const float one = 1.0f, zero = 0.0f;  // cuDNN's alpha and beta: host scalars

using FilterDescriptor = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                         cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                    cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor = CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                          cudnnDestroyPoolingDescriptor>;
using ActivationDescriptor =
    CudnnDescriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor,
                    cudnnDestroyActivationDescriptor>;

// ------------------------------------------------------------------------------------------------
// Convolution

// The search's own scratch: the limit, or a quarter of what is free if that is less.
DeviceBuffer search_workspace(std::size_t limit) {
  std::size_t free_bytes = 0, total_bytes = 0;
  DLSCALE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceBuffer(std::min(limit, free_bytes / 4));
}

// The fastest of cuDNN's timed results that is acceptable here:
//  - of the requested math: with fp32 (CUDNN_FMA_MATH) no result that used tensor cores; tf32
//    and bf16 allow either, but never one that converted float data to FP16
//    (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, which cuDNN's search may time even so);
//  - within the workspace limit;
//  - deterministic unless a non-deterministic one is more than 10% faster. Atomics-based
//    algorithms sum in a different order on every run, so reruns do not reproduce bit for bit;
//    ranks agree either way, since they all apply the same allreduced sum. PyTorch's
//    cudnn.benchmark makes the same trade without the 10%.
template <typename Perf>
const Perf& fastest_acceptable(const std::vector<Perf>& results, int returned, cudnnMathType_t math,
                               std::size_t workspace_bytes, const char* pass) {
  constexpr double determinism_worth = 1.10;
  const Perf* fastest = nullptr;
  const Perf* fastest_deterministic = nullptr;
  for (int i = 0; i < returned; ++i) {
    const Perf& result = results[i];
    if (result.status != CUDNN_STATUS_SUCCESS ||
        (math == CUDNN_FMA_MATH && result.mathType != CUDNN_FMA_MATH) ||
        result.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || result.memory > workspace_bytes)
      continue;
    if (fastest == nullptr || result.time < fastest->time) fastest = &result;
    if (result.determinism == CUDNN_DETERMINISTIC &&
        (fastest_deterministic == nullptr || result.time < fastest_deterministic->time))
      fastest_deterministic = &result;
  }
  if (fastest_deterministic != nullptr &&
      fastest_deterministic->time <= determinism_worth * fastest->time)
    return *fastest_deterministic;
  if (fastest != nullptr) return *fastest;
  throw std::runtime_error(std::string("cuDNN offers no ") + pass +
                           " convolution algorithm of the requested precision for this layer");
}

// Under bf16, cuDNN's legacy convolutions take the configuration its documentation calls
// PSEUDO_BFLOAT16_CONFIG: input, filter and output tensors all bf16, the convolution descriptor's
// compute type float (products summed in float), on compute capability 8.0 and later; PyTorch's
// cuDNN convolutions describe bf16 the same way, with CUDNN_TENSOR_OP_MATH. A float output from
// bf16 inputs, which oneDNN offers the CPU, is not among the configurations, so the output (y, dx
// or dw) is written in bf16 and widened: PyTorch's autocast rounds it the same way.
class CudnnConvolution final : public ConvolutionKernel {
 public:
  CudnnConvolution(const CudaContext& context, const ConvolutionGeometry& geometry)
      : context_(context),
        geometry_(geometry),
        in_bf16_(context.precision == Precision::bf16),
        data_type_(in_bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT),
        // bf16 tensors are what tensor cores are for; float ones follow the precision.
        math_(in_bf16_ ? CUDNN_TENSOR_OP_MATH : context.cudnn_math()) {
    const auto& g = geometry_;
    if (g.groups < 1 || g.input.channels % g.groups != 0 || g.output_channels % g.groups != 0)
      throw std::invalid_argument("convolution: channels must divide into the groups");
    // OIHW; with groups cuDNN takes K x C/groups x R x S, which is OIHW's G x O/G x I/G x H x W.
    DLSCALE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(weights_, data_type_, CUDNN_TENSOR_NCHW,
                                                   g.output_channels, g.input.channels / g.groups,
                                                   g.kernel, g.kernel));
    if (g.bias) describe_channels(bias_, g.output_channels);
    if (g.relu)
      DLSCALE_CUDNN_CHECK(
          cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0));
  }

  void forward(int batch, const float* x, const float* weights, const float* bias,
               float* y) override {
    Plan& p = plan_for(batch);
    if (in_bf16_) {
      const Bf16Operands bf16 = bf16_operands(batch);
      round_to_bf16(x, bf16.input, input_count(batch), context_.stream);
      round_to_bf16(weights, bf16.weights, geometry_.weight_count(), context_.stream);
      convolve_forward(p, bf16.input, bf16.weights, bf16.output);
      widen_to_float(bf16.output, y, output_count(batch), context_.stream);
    } else {
      convolve_forward(p, x, weights, y);
    }
    if (fused_bias_and_relu() && (geometry_.bias || geometry_.relu)) {
      // DLSCALE_CUDA_NCHW_BIAS_RELU=fused: the bias and the ReLU below in one pass of dlscale's
      // own kernel (channel_kernels.hpp).
      const ImageShape out = geometry_.output();
      add_bias_and_relu(batch, out.channels, std::int64_t(out.height) * out.width,
                        geometry_.bias ? bias : nullptr, geometry_.relu, context_.fast_divmod, y,
                        context_.stream);
      return;
    }
    // The bias broadcasts over batch, height and width: y += bias, in float.
    if (geometry_.bias)
      DLSCALE_CUDNN_CHECK(
          cudnnAddTensor(context_.cudnn, &one, bias_, bias, &one, p.float_output, y));
    // The descriptor API fuses a ReLU only into cudnnConvolutionBiasActivationForward, for
    // IMPLICIT_PRECOMP_GEMM alone: here it is a pass of its own, in place (the graph path fuses
    // it).
    if (geometry_.relu)
      DLSCALE_CUDNN_CHECK(cudnnActivationForward(context_.cudnn, relu_, &one, p.float_output, y,
                                                 &zero, p.float_output, y));
  }

  void backward(int batch, const float* x, const float* weights, const float* y,
                const float* output_gradient, float* input_gradient, float* weight_gradient,
                float* bias_gradient) override {
    Plan& p = plan_for(batch);
    if (fused_bias_and_relu() && (geometry_.relu || geometry_.bias)) {
      // DLSCALE_CUDA_NCHW_BIAS_RELU=fused: the mask and the bias gradient below from one
      // pass over dy, of dlscale's own kernel (channel_kernels.hpp).
      const ImageShape out = geometry_.output();
      float* masked = geometry_.relu ? p.relu_gradient.as<float>() : nullptr;
      relu_mask_and_bias_gradient(batch, out.channels, std::int64_t(out.height) * out.width,
                                  geometry_.relu ? y : nullptr, output_gradient, masked,
                                  geometry_.bias ? bias_gradient : nullptr,
                                  p.bias_gradient_scratch.data(), context_.stream);
      if (geometry_.relu) output_gradient = masked;
    } else {
      // A fused ReLU's gradient: dy where y > 0, into the plan's own buffer (for ReLU, cuDNN's
      // backward reads the same mask from y as from x).
      if (geometry_.relu) {
        DLSCALE_CUDNN_CHECK(cudnnActivationBackward(
            context_.cudnn, relu_, &one, p.float_output, y, p.float_output, output_gradient,
            p.float_output, y, &zero, p.float_output, p.relu_gradient.data()));
        output_gradient = p.relu_gradient.as<float>();
      }
      // The bias gradient sums the float output gradient, under bf16 too.
      if (geometry_.bias)
        DLSCALE_CUDNN_CHECK(cudnnConvolutionBackwardBias(
            context_.cudnn, &one, p.float_output, output_gradient, &zero, bias_, bias_gradient));
    }
    if (!in_bf16_) {
      convolve_filter(p, x, output_gradient, weight_gradient);
      // The first layer: nothing below wants its input gradient.
      if (input_gradient != nullptr) convolve_data(p, weights, output_gradient, input_gradient);
      return;
    }
    // The weight region holds dw, then w; the input region dx once the filter pass has read x.
    // Stream order keeps each read before the next write.
    const Bf16Operands bf16 = bf16_operands(batch);
    round_to_bf16(x, bf16.input, input_count(batch), context_.stream);
    round_to_bf16(output_gradient, bf16.output, output_count(batch), context_.stream);
    convolve_filter(p, bf16.input, bf16.output, bf16.weights);
    widen_to_float(bf16.weights, weight_gradient, geometry_.weight_count(), context_.stream);
    if (input_gradient == nullptr) return;
    round_to_bf16(weights, bf16.weights, geometry_.weight_count(), context_.stream);
    convolve_data(p, bf16.weights, bf16.output, bf16.input);
    widen_to_float(bf16.input, input_gradient, input_count(batch), context_.stream);
  }

 private:
  // What one batch size needs. Each pass has its own convolution descriptor because each runs
  // with the math type its algorithm was timed with.
  struct Plan {
    TensorDescriptor input, output;  // as the convolution reads and writes them: float or bf16
    TensorDescriptor float_output;   // y and dy as the network holds them, for the bias
    ConvolutionDescriptor forward_convolution, data_convolution, filter_convolution;
    bool forward_chosen = false, data_chosen = false, filter_chosen = false;
    cudnnConvolutionFwdAlgo_t forward_algorithm{};
    cudnnConvolutionBwdDataAlgo_t data_algorithm{};
    cudnnConvolutionBwdFilterAlgo_t filter_algorithm{};
    int batch = 0;
    std::size_t workspace_bytes = 0;  // the most any of the chosen algorithms needs
    DeviceBuffer relu_gradient;       // a fused ReLU's masked output gradient, float
    // The fused bias gradient's partial sums (DLSCALE_CUDA_NCHW_BIAS_RELU=fused with a bias).
    DeviceBuffer bias_gradient_scratch;
  };

  // Where the bf16 copies of one call live: input-sized, weight-sized and output-sized regions.
  struct Bf16Operands {
    __nv_bfloat16 *input, *weights, *output;
  };

  Bf16Operands bf16_operands(int batch) {
    const auto [input, weights, output] = context_.bf16_staging->regions<3>(
        {input_count(batch), geometry_.weight_count(), output_count(batch)}, context_.stream);
    return {input, weights, output};
  }

  std::size_t input_count(int batch) const { return std::size_t(batch) * geometry_.input.size(); }
  std::size_t output_count(int batch) const {
    return std::size_t(batch) * geometry_.output().size();
  }

  // The three passes on the tensors cuDNN reads and writes (float, or the bf16 copies), each
  // choosing its algorithm on its first call for a batch size. beta = 0 everywhere: outputs and
  // gradients are overwritten, never accumulated.
  void convolve_forward(Plan& p, const void* x, const void* weights, void* y) {
    if (!p.forward_chosen) choose_forward(p, x, weights, y);
    DLSCALE_CUDNN_CHECK(cudnnConvolutionForward(
        context_.cudnn, &one, p.input, x, weights_, weights, p.forward_convolution,
        p.forward_algorithm, workspace(p), p.workspace_bytes, &zero, p.output, y));
  }

  void convolve_filter(Plan& p, const void* x, const void* output_gradient, void* weight_gradient) {
    if (!p.filter_chosen) choose_filter(p, x, output_gradient, weight_gradient);
    DLSCALE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        context_.cudnn, &one, p.input, x, p.output, output_gradient, p.filter_convolution,
        p.filter_algorithm, workspace(p), p.workspace_bytes, &zero, weights_, weight_gradient));
  }

  void convolve_data(Plan& p, const void* weights, const void* output_gradient,
                     void* input_gradient) {
    if (!p.data_chosen) choose_data(p, weights, output_gradient, input_gradient);
    DLSCALE_CUDNN_CHECK(cudnnConvolutionBackwardData(
        context_.cudnn, &one, weights_, weights, p.output, output_gradient, p.data_convolution,
        p.data_algorithm, workspace(p), p.workspace_bytes, &zero, p.input, input_gradient));
  }

  Plan& plan_for(int batch) {
    return plan_of(plans_, batch, context_.stream, "cuDNN convolution", [&](Plan& p) {
      const auto& g = geometry_;
      describe_images(p.input, batch, g.input, false, data_type_);
      describe_images(p.output, batch, g.output(), false, data_type_);
      describe_images(p.float_output, batch, g.output(), false);
      p.batch = batch;
      if (g.relu) p.relu_gradient = DeviceBuffer(output_count(batch) * sizeof(float));
      if (fused_bias_and_relu() && g.bias) {
        const ImageShape out = g.output();
        p.bias_gradient_scratch = DeviceBuffer(nchw_bias_gradient_scratch_bytes(
            batch, out.channels, std::int64_t(out.height) * out.width));
      }
      for (cudnnConvolutionDescriptor_t convolution :
           {cudnnConvolutionDescriptor_t(p.forward_convolution),
            cudnnConvolutionDescriptor_t(p.data_convolution),
            cudnnConvolutionDescriptor_t(p.filter_convolution)}) {
        // Cross-correlation, which is what oneDNN and every framework call a convolution.
        DLSCALE_CUDNN_CHECK(
            cudnnSetConvolution2dDescriptor(convolution, g.padding, g.padding, g.stride, g.stride,
                                            1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        DLSCALE_CUDNN_CHECK(cudnnSetConvolutionGroupCount(convolution, g.groups));
        DLSCALE_CUDNN_CHECK(cudnnSetConvolutionMathType(convolution, math_));
      }
      int n = 0, c = 0, h = 0, w = 0;
      DLSCALE_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p.forward_convolution, p.input,
                                                                weights_, &n, &c, &h, &w));
      const ImageShape out = g.output();
      if (n != batch || c != out.channels || h != out.height || w != out.width)
        throw std::logic_error("cuDNN convolution: output shape differs from the geometry's");
    });
  }

  // cuDNN's real search (the Find*Ex calls time every algorithm on this layer's own buffers),
  // made once per batch size and pass. It writes y, dx or dw, which the call then overwrites.
  // `max_count` and `find` make the pass's own cuDNN calls; the chosen algorithm's math type is
  // set on `convolution` and its workspace reserved.
  template <typename Perf, typename MaxCount, typename Find>
  auto choose(Plan& p, cudnnConvolutionDescriptor_t convolution, const char* pass,
              MaxCount max_count, Find find) {
    require_not_capturing(context_.stream, "cuDNN convolution search");
    int count = 0, returned = 0;
    max_count(&count);
    std::vector<Perf> results(std::size_t(std::max(count, 1)));
    std::size_t searched_bytes = 0;
    {
      const DeviceBuffer scratch = search_workspace(context_.convolution_workspace_limit);
      searched_bytes = scratch.size();
      find(count, &returned, results.data(), scratch.data(), scratch.size());
    }
    const Perf& best = fastest_acceptable(results, returned, math_, searched_bytes, pass);
    if (cudnn_search_verbose()) print_search(p, pass, results, returned, best, searched_bytes);
    DLSCALE_CUDNN_CHECK(cudnnSetConvolutionMathType(convolution, best.mathType));
    reserve_workspace(p, best.memory);
    return best.algo;
  }

  void choose_forward(Plan& p, const void* x, const void* weights, void* y) {
    using Perf = cudnnConvolutionFwdAlgoPerf_t;
    p.forward_algorithm = choose<Perf>(
        p, p.forward_convolution, "forward",
        [&](int* count) {
          DLSCALE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(context_.cudnn, count));
        },
        [&](int count, int* returned, Perf* results, void* scratch, std::size_t bytes) {
          DLSCALE_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
              context_.cudnn, p.input, x, weights_, weights, p.forward_convolution, p.output, y,
              count, returned, results, scratch, bytes));
        });
    p.forward_chosen = true;
  }

  void choose_data(Plan& p, const void* weights, const void* output_gradient,
                   void* input_gradient) {
    using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
    p.data_algorithm = choose<Perf>(
        p, p.data_convolution, "backward-data",
        [&](int* count) {
          DLSCALE_CUDNN_CHECK(
              cudnnGetConvolutionBackwardDataAlgorithmMaxCount(context_.cudnn, count));
        },
        [&](int count, int* returned, Perf* results, void* scratch, std::size_t bytes) {
          DLSCALE_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
              context_.cudnn, weights_, weights, p.output, output_gradient, p.data_convolution,
              p.input, input_gradient, count, returned, results, scratch, bytes));
        });
    p.data_chosen = true;
  }

  void choose_filter(Plan& p, const void* x, const void* output_gradient, void* weight_gradient) {
    using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
    p.filter_algorithm = choose<Perf>(
        p, p.filter_convolution, "backward-filter",
        [&](int* count) {
          DLSCALE_CUDNN_CHECK(
              cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(context_.cudnn, count));
        },
        [&](int count, int* returned, Perf* results, void* scratch, std::size_t bytes) {
          DLSCALE_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              context_.cudnn, p.input, x, p.output, output_gradient, p.filter_convolution, weights_,
              weight_gradient, count, returned, results, scratch, bytes));
        });
    p.filter_chosen = true;
  }

  // The bias and ReLU in one pass each way of dlscale's own kernels
  // (DLSCALE_CUDA_NCHW_BIAS_RELU=fused), where cuDNN takes two.
  bool fused_bias_and_relu() const { return context_.nchw_bias_relu == NchwBiasRelu::fused; }

  // DLSCALE_CUDNN_GRAPH_VERBOSE=1: every algorithm the search timed for a pass (its time, the
  // workspace it asks for, N for a non-deterministic one, T for one on tensor cores), and the
  // one chosen, on stderr: which algorithms a layer runs on, beside PyTorch's profile.
  template <typename Perf>
  void print_search(const Plan& p, const char* pass, const std::vector<Perf>& results, int returned,
                    const Perf& best, std::size_t searched_bytes) const {
    const auto& g = geometry_;
    std::string timed;
    for (int i = 0; i < returned; ++i) {
      const Perf& r = results[std::size_t(i)];
      if (r.status != CUDNN_STATUS_SUCCESS) continue;
      timed += fmt::format(
          " algo{} {:.3f} ms {:.0f} MiB{}{};", int(r.algo), r.time,
          double(r.memory) / double(1 << 20), r.determinism == CUDNN_DETERMINISTIC ? "" : " N",
          r.mathType == CUDNN_DEFAULT_MATH || r.mathType == CUDNN_FMA_MATH ? "" : " T");
    }
    std::fprintf(stderr,
                 "dlscale: cuDNN legacy: %s %dx%dx%d -> %d k%d s%d p%d g%d batch%d %s (workspace "
                 "up to %.0f MiB):%s chose algo%d\n",
                 pass, g.input.channels, g.input.height, g.input.width, g.output_channels, g.kernel,
                 g.stride, g.padding, g.groups, p.batch, precision_name(context_.precision),
                 double(searched_bytes) / double(1 << 20), timed.c_str(), int(best.algo));
  }

  // The device's one convolution workspace (cudnn_support.hpp) serves all three passes of every
  // layer; a plan records the most its algorithms need, and the workspace grows to that on the
  // first calls.
  void reserve_workspace(Plan& p, std::size_t bytes) {
    p.workspace_bytes = std::max(p.workspace_bytes, bytes);
  }
  void* workspace(const Plan& p) {
    return context_.convolution_workspace->get(p.workspace_bytes, context_.stream);
  }

  CudaContext context_;
  ConvolutionGeometry geometry_;
  bool in_bf16_;               // --precision bf16: cuDNN reads and writes bf16 copies
  cudnnDataType_t data_type_;  // of the tensors cuDNN reads and writes
  cudnnMathType_t math_;       // that the algorithm search may choose
  FilterDescriptor weights_;
  TensorDescriptor bias_;
  ActivationDescriptor relu_;  // geometry's relu only
  std::map<int, Plan> plans_;  // by batch size
};

// ------------------------------------------------------------------------------------------------
// Pooling

class CudnnPooling final : public PoolingKernel {
 public:
  CudnnPooling(const CudaContext& context, const PoolingGeometry& geometry)
      : context_(context), geometry_(geometry) {
    // Max pooling in its deterministic form (plain CUDNN_POOLING_MAX may scatter gradients with
    // atomics). Average pooling counts the padding in the divisor, as the CPU's oneDNN kernel
    // (pooling_avg_include_padding) and PyTorch's default do.
    const cudnnPoolingMode_t mode = geometry.kind == PoolingKind::max
                                        ? CUDNN_POOLING_MAX_DETERMINISTIC
                                        : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    DLSCALE_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
        pooling_, mode, CUDNN_NOT_PROPAGATE_NAN, geometry.kernel, geometry.kernel, geometry.padding,
        geometry.padding, geometry.stride, geometry.stride));
  }

  void forward(int batch, const float* x, float* y) override {
    Plan& p = plan_for(batch);
    // Pooling that changes the layout (native NHWC in, NCHW out before a dense layer) pools in
    // the input's layout into its own copy of y, then re-lays that into y: cuDNN's pooling is
    // not known to take x and y in different formats, and its backward reads y beside x.
    float* pooled = p.reformatted_output.size() > 0 ? p.reformatted_output.as<float>() : y;
    DLSCALE_CUDNN_CHECK(
        cudnnPoolingForward(context_.cudnn, pooling_, &one, p.input, x, &zero, p.output, pooled));
    if (pooled != y)
      convert_images(static_cast<const float*>(pooled), MemoryOrder::nhwc, y, MemoryOrder::nchw,
                     output_shape(batch), context_.stream);
    // cuDNN's backward re-derives the max positions from x and y; the network keeps both alive
    // until this layer's backward.
    last_input_ = x;
    last_output_ = pooled;
  }

  void backward(int batch, const float* output_gradient, float* input_gradient) override {
    if (last_input_ == nullptr) throw std::logic_error("cuDNN pooling: backward before forward");
    Plan& p = plan_for(batch);
    const float* gradient = output_gradient;
    if (p.reformatted_gradient.size() > 0) {
      convert_images(output_gradient, MemoryOrder::nchw, p.reformatted_gradient.as<float>(),
                     MemoryOrder::nhwc, output_shape(batch), context_.stream);
      gradient = p.reformatted_gradient.as<float>();
    }
    DLSCALE_CUDNN_CHECK(cudnnPoolingBackward(context_.cudnn, pooling_, &one, p.output, last_output_,
                                             p.output, gradient, p.input, last_input_, &zero,
                                             p.input, input_gradient));
  }

 private:
  // `output` describes y as cuDNN writes it: in the input's format wherever the two layouts
  // differ (then reformatted_output holds it and reformatted_gradient dy, both NHWC).
  struct Plan {
    TensorDescriptor input, output;
    DeviceBuffer reformatted_output, reformatted_gradient;
  };

  ImageBatchShape output_shape(int batch) const {
    const ImageShape out = geometry_.output();
    return {batch, out.channels, out.height, out.width};
  }

  Plan& plan_for(int batch) {
    return plan_of(plans_, batch, context_.stream, "cuDNN pooling", [&](Plan& p) {
      const bool input_nhwc = in_nhwc(geometry_.input_layout);
      // One pixel or one channel lies the same in both orders: no reformatting then.
      const bool reformat =
          input_nhwc != in_nhwc(geometry_.output_layout) && !orders_agree(output_shape(batch));
      if (reformat && !input_nhwc)
        throw std::logic_error("cuDNN pooling: NCHW input with an NHWC output is never planned");
      describe_images(p.input, batch, geometry_.input, input_nhwc);
      describe_images(p.output, batch, geometry_.output(),
                      reformat ? input_nhwc : in_nhwc(geometry_.output_layout));
      if (reformat) {
        p.reformatted_output = DeviceBuffer(output_shape(batch).size() * sizeof(float));
        p.reformatted_gradient = DeviceBuffer(output_shape(batch).size() * sizeof(float));
      }
      int n = 0, c = 0, h = 0, w = 0;
      DLSCALE_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pooling_, p.input, &n, &c, &h, &w));
      const ImageShape out = geometry_.output();
      if (n != batch || c != out.channels || h != out.height || w != out.width)
        throw std::logic_error("cuDNN pooling: output shape differs from the geometry's");
    });
  }

  bool in_nhwc(ImageLayout layout) const {
    return layout == ImageLayout::native && context_.native_is_nhwc();
  }

  CudaContext context_;
  PoolingGeometry geometry_;
  PoolingDescriptor pooling_;
  std::map<int, Plan> plans_;
  const float* last_input_ = nullptr;
  const float* last_output_ = nullptr;
};

// ------------------------------------------------------------------------------------------------
// Batch normalization

// Scratch memory shared by the batch-norm kernels of one device (one cuDNN handle). With its ReLU,
// a layer's backward needs a whole activation's worth of masked gradient before cuDNN's batch-norm
// backward; one such buffer per layer would add a copy of every activation to a network that
// otherwise keeps just two gradient buffers. All kernels of a device run in order on its one
// stream, so one buffer serves them all. It only grows, on first calls, and keeps what it has
// outgrown until its last kernel is gone: a graph captured earlier may still point into it.
class SharedScratch {
 public:
  static std::shared_ptr<SharedScratch> of(cudnnHandle_t handle) {
    static std::mutex mutex;
    static std::map<cudnnHandle_t, std::weak_ptr<SharedScratch>> scratches;
    const std::lock_guard lock(mutex);
    std::weak_ptr<SharedScratch>& entry = scratches[handle];
    std::shared_ptr<SharedScratch> scratch = entry.lock();
    if (!scratch) {
      scratch = std::make_shared<SharedScratch>();
      entry = scratch;
    }
    return scratch;
  }

  // At least `count` floats.
  float* floats(std::size_t count, cudaStream_t stream) {
    const std::size_t bytes = count * sizeof(float);
    if (buffers_.empty() || buffers_.back().size() < bytes) {
      require_not_capturing(stream, "cuDNN batch norm scratch");
      // Doubling bounds what is kept: everything outgrown adds up to less than the last buffer.
      const std::size_t grown = buffers_.empty() ? 0 : 2 * buffers_.back().size();
      buffers_.emplace_back(std::max(bytes, grown));
    }
    return buffers_.back().as<float>();
  }

 private:
  std::vector<DeviceBuffer> buffers_;  // the last one is in use
};

class CudnnBatchNorm final : public BatchNormKernel {
 public:
  CudnnBatchNorm(const CudaContext& context, const BatchNormGeometry& geometry)
      : context_(context),
        geometry_(geometry),
        saved_mean_(geometry.shape.channels * sizeof(float)),
        saved_inverse_deviation_(geometry.shape.channels * sizeof(float)),
        scratch_(SharedScratch::of(context.cudnn)) {
    describe_channels(channels_, geometry.shape.channels);  // scale, shift and statistics
    if (geometry_.relu)
      DLSCALE_CUDNN_CHECK(
          cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0));
  }

  // Normalises with this batch's statistics over (batch, height, width) and keeps mean and
  // 1/sqrt(var + epsilon) for backward. No running averages: dlscale only trains, and cuDNN
  // takes null running buffers (as from PyTorch with track_running_stats=False); the averaging
  // factor is then unused.
  void forward(int batch, const float* x, const float* scale, const float* shift,
               float* y) override {
    Plan& p = plan_for(batch);
    DLSCALE_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        context_.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p.data, x, p.data, y, channels_,
        scale, shift, 0.0, nullptr, nullptr, double(epsilon), saved_mean_.data(),
        saved_inverse_deviation_.data()));
    // The fused ReLU, as a second pass in place. (cuDNN's own fusion, ...ForwardTrainingEx with
    // CUDNN_BATCHNORM_OPS_BN_ACTIVATION, is meant for NHWC tensors, not this NCHW float.)
    if (geometry_.relu)
      DLSCALE_CUDNN_CHECK(
          cudnnActivationForward(context_.cudnn, relu_, &one, p.data, y, &zero, p.data, y));
    last_output_ = y;
  }

  void backward(int batch, const float* x, const float* scale, const float* /*shift*/,
                const float* output_gradient, float* input_gradient, float* scale_gradient,
                float* shift_gradient) override {
    if (last_output_ == nullptr)
      throw std::logic_error("cuDNN batch norm: backward before forward");
    Plan& p = plan_for(batch);
    const std::size_t count = std::size_t(batch) * geometry_.shape.size();
    // Scratch: the ReLU's masked gradient, then (for a first layer, whose input gradient nobody
    // wants) somewhere for cuDNN's input gradient, which it always writes.
    const bool discard = input_gradient == nullptr;
    const std::size_t scratch_count = (geometry_.relu ? count : 0) + (discard ? count : 0);
    float* scratch = scratch_count > 0 ? scratch_->floats(scratch_count, context_.stream) : nullptr;
    const float* normalized_gradient = output_gradient;
    if (geometry_.relu) {
      // Through the ReLU first: the gradient passes where the output y is positive. y stands in
      // for the ReLU's input too, since y > 0 exactly where its input is.
      DLSCALE_CUDNN_CHECK(cudnnActivationBackward(context_.cudnn, relu_, &one, p.data, last_output_,
                                                  p.data, output_gradient, p.data, last_output_,
                                                  &zero, p.data, scratch));
      normalized_gradient = scratch;
    }
    float* data_gradient = discard ? scratch + (geometry_.relu ? count : 0) : input_gradient;
    // beta = 0 for data and parameter gradients alike: both are overwritten.
    DLSCALE_CUDNN_CHECK(cudnnBatchNormalizationBackward(
        context_.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, p.data, x, p.data,
        normalized_gradient, p.data, data_gradient, channels_, scale, scale_gradient,
        shift_gradient, double(epsilon), saved_mean_.data(), saved_inverse_deviation_.data()));
  }

 private:
  struct Plan {
    TensorDescriptor data;  // x, y and their gradients alike
  };

  Plan& plan_for(int batch) {
    return plan_of(plans_, batch, context_.stream, "cuDNN batch norm", [&](Plan& p) {
      describe_images(p.data, batch, geometry_.shape, in_nhwc(geometry_.layout));
      // Reserve the ReLU's scratch now: forward's first calls run from the widest layers down,
      // so the shared buffer reaches its size at once instead of growing layer by layer.
      if (geometry_.relu)
        scratch_->floats(std::size_t(batch) * geometry_.shape.size(), context_.stream);
    });
  }

  bool in_nhwc(ImageLayout layout) const {
    return layout == ImageLayout::native && context_.native_is_nhwc();
  }

  CudaContext context_;
  BatchNormGeometry geometry_;
  TensorDescriptor channels_;
  ActivationDescriptor relu_;
  DeviceBuffer saved_mean_, saved_inverse_deviation_;  // from the last forward, for backward
  std::shared_ptr<SharedScratch> scratch_;
  std::map<int, Plan> plans_;
  const float* last_output_ = nullptr;  // the ReLU's output, for its gradient mask
};

}  // namespace

std::unique_ptr<ConvolutionKernel> make_cudnn_convolution(const CudaContext& context,
                                                          const ConvolutionGeometry& geometry) {
  return std::make_unique<CudnnConvolution>(context, geometry);
}

std::unique_ptr<PoolingKernel> make_cudnn_pooling(const CudaContext& context,
                                                  const PoolingGeometry& geometry) {
  return std::make_unique<CudnnPooling>(context, geometry);
}

std::unique_ptr<BatchNormKernel> make_cudnn_batch_norm(const CudaContext& context,
                                                       const BatchNormGeometry& geometry) {
  return std::make_unique<CudnnBatchNorm>(context, geometry);
}

}  // namespace dlscale::kernels

#pragma GCC diagnostic pop
