// What every CUDA kernel of one device shares: the GPU, its compute stream, the cuBLAS and cuDNN
// handles bound to that stream, the precision the user chose, which cuDNN API the convolutions use
// (and with it the device's native image layout) and, for bf16, the staging memory of the bf16
// copies. The CudaDevice owns them; the kernels borrow them, so all work of a step is ordered on
// one stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>

#include "kernels/device.hpp"

namespace dlscale::kernels {

class Bf16Staging;
class ConvolutionGraphCache;
class ConvolutionWorkspace;
class BiasGemm;

// The most workspace one convolution algorithm or engine may ask for unless
// DLSCALE_CUDNN_WORKSPACE_MIB says otherwise (and never more than a quarter of the free memory
// when the layer is first searched). Only candidates that fit are timed. 4096 MiB since an H200
// timed it against 512 (2026-11-28): vgg-16's fp32 step 136.9 -> 81.8 ms (FFT and Winograd
// algorithms that need more than 512 MiB; PyTorch's 98.1 ms in the same lease), its tf32 step
// 36.9 -> 35.5, the GPU's peak 2.3 GiB higher; alexnet-r, resnet-50, resnet-56, alexnet-s and
// vgg-16 in bf16 unchanged.
inline constexpr std::size_t default_convolution_workspace_limit = std::size_t(4096) << 20;

// Which cuDNN API the image kernels' convolutions run on (DLSCALE_CUDNN_API): legacy, the
// descriptor API in NCHW (cudnn_image_kernels.cpp), or graph, cuDNN's graph API through the cuDNN
// frontend in NHWC (cudnn_graph_convolution.cpp). Under graph the device's native image layout is
// NHWC, so pooling and batch norm run in NHWC as well; under legacy it is NCHW.
enum class CudnnApi { legacy, graph };
inline constexpr EnumNames<CudnnApi, 2> cudnn_api_names{{"legacy", "graph"}};  // DLSCALE_CUDNN_API

// How a GPT's causal attention runs (DLSCALE_CUDNN_ATTENTION): gemm, composed from cuBLAS GEMMs
// and dlscale's causal softmax, per sample and pass of heads
// (model/causal_self_attention_layer.hpp), or sdpa, cuDNN's fused scaled-dot-product attention over
// the whole batch (cudnn_attention.cpp; under --precision bf16 only, as cuDNN runs it on bf16
// tensors; the other precisions stay on gemm). sdpa is the default since it ran on an H200
// (2026-11-27: its tests passed; gpt2-small bf16 at batch 8 143.5 ms a step against gemm's 185.3,
// 46.2 with the tiled layer norm gradient, PyTorch 44.9: docs/performance.md). Unless asked for,
// a model whose head width cuDNN cannot read, or a build without the cuDNN frontend, keeps gemm.
enum class AttentionApi { gemm, sdpa };
inline constexpr EnumNames<AttentionApi, 2> attention_api_names{{"gemm", "sdpa"}};

// The element type of images between layers (DLSCALE_CUDA_IMAGE_ACTIVATIONS) under
// --precision bf16 on the graph path: float (every layer rounds its input to bf16 for cuDNN and
// writes float), or bf16, as autocast keeps a channels-last network's activations and their
// gradients (ImageLayout::native then means NHWC bf16; parameters, their gradients, the loss and
// the update stay float). bf16 is the default since it ran on an H200 (2026-11-27): bf16 steps
// of resnet-50 1.40x, mobilenet-v2 1.51x and vgg-16 1.22x faster than with float images, its
// kernels' tests passed, and resnet-56's lower losses after three steps were reproduced by a CPU
// emulation of the same rounding (docs/gpu.md).
enum class ImageActivations { float32, bf16 };
inline constexpr EnumNames<ImageActivations, 2> image_activation_names{{"float", "bf16"}};

// How the legacy path's convolutions add their bias and fused ReLU (DLSCALE_CUDA_NCHW_BIAS_RELU):
// cudnn, the descriptor API's calls, two passes over the NCHW output forward (cudnnAddTensor,
// cudnnActivationForward) and two over its gradient backward (cudnnActivationBackward, then
// cudnnConvolutionBackwardBias reading the masked gradient again); or fused, one pass each way of
// dlscale's own deterministic kernels (channel_kernels.hpp).
enum class NchwBiasRelu { cudnn, fused };
inline constexpr EnumNames<NchwBiasRelu, 2> nchw_bias_relu_names{{"cudnn", "fused"}};

// Who pools the legacy path's NCHW images (DLSCALE_CUDA_NCHW_POOLING): cudnn, the descriptor
// API's cudnnPoolingForward and Backward (max in its deterministic mode, which reads x, y and dy
// to find each window's winner again); or own, dlscale's kernels (pooling_kernels.hpp), which
// keep each winner's position from the forward pass as the graph path's NHWC pooling does.
enum class NchwPooling { cudnn, own };
inline constexpr EnumNames<NchwPooling, 2> nchw_pooling_names{{"cudnn", "own"}};

// Who runs the legacy path's batch norm on NCHW images (DLSCALE_CUDA_NCHW_BATCH_NORM): cudnn,
// the descriptor API's cudnnBatchNormalizationForwardTraining and Backward, with a fused ReLU as
// two more calls (cudnnActivationForward and Backward); or own, dlscale's kernels
// (channel_kernels.hpp), the graph path's NHWC batch norm summing NCHW images, with the ReLU in
// the normalizing pass and in the gradient's.
enum class NchwBatchNorm { cudnn, own };
inline constexpr EnumNames<NchwBatchNorm, 2> nchw_batch_norm_names{{"cudnn", "own"}};

struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  Precision precision = Precision::fp32;
  CudnnApi cudnn_api = CudnnApi::legacy;
  Bf16Staging* bf16_staging = nullptr;  // where GEMMs and convolutions put their bf16 copies
  // The graph convolutions' shared choices and workspace (cudnn_graph_convolution.cpp); null on
  // the legacy path.
  ConvolutionGraphCache* convolution_graphs = nullptr;
  // The convolutions' one workspace (cudnn_support.hpp), and what one algorithm may ask of it.
  ConvolutionWorkspace* convolution_workspace = nullptr;
  std::size_t convolution_workspace_limit = default_convolution_workspace_limit;
  // gemm_strided_batched (the heads of an attention layer) as one cublasGemmStridedBatchedEx, the
  // default since it ran on an H200 (its test passed; gpt2-small bf16 193.6 ms a step against
  // 242.5 for the loop: docs/performance.md); DLSCALE_CUDA_BATCHED_GEMM=loop, one cublasGemmEx
  // per matrix.
  bool cublas_strided_batched = true;
  AttentionApi attention = AttentionApi::sdpa;
  bool attention_asked = false;  // DLSCALE_CUDNN_ATTENTION was set: no quiet fallback to gemm
  // The layer norm's scale and shift gradients summed by 32 x 32-thread tiles (as column sums
  // are), the default since it ran on an H200 (its test passed; gpt2-small bf16 87.9 ms a step
  // against 185.3 for serial); DLSCALE_CUDA_LAYER_NORM_GRADIENT=serial, one thread per column
  // over all rows (8,192 of them for gpt2-small at batch 8).
  bool tiled_layer_norm_gradient = true;
  // A dense layer without bias (a tied output head) rounds its output gradient into bf16 rows
  // padded to 8 values, so that cuBLAS reads aligned rows where the width is no multiple of 8
  // (GPT-2's 50,257 words). The default since it ran on an H200 (2026-11-27: its test passed;
  // gpt2-small bf16 43.6 ms a step against 46.0 unpadded); DLSCALE_CUDA_PADDED_BF16_ROWS=no,
  // unpadded rows.
  bool padded_bf16_rows = true;
  // The softmax cross-entropy, which streams every row of logits
  // (50,257 words for GPT-2, 10,000 for the LSTMs) three times, the element-wise kernels of a
  // dense layer's bias, the residual add and GELU, and the bf16 rounding and widening of GEMM,
  // attention and LSTM operands have each thread read four values before using any, keeping more
  // reads in flight; the results are the same bit for bit. The default since it ran on an H200
  // (2026-11-27: its bit-for-bit tests passed; gpt2-small bf16 41.0 ms a step against 43.6,
  // lstm-64 bf16 18.7 against 20.8); DLSCALE_CUDA_BATCHED_LOADS=no, one read at a time.
  bool batched_loads = true;
  // A dense layer's forward adds its bias inside the GEMM, cuBLASLt's bias epilogue
  // (cublaslt_bias_gemm.hpp), as PyTorch's addmm does, where the GEMM and then a bias kernel read
  // and write the output twice; the same sums, rounded once instead of twice. The default since it
  // ran on an H200 (2026-11-27: its tests passed; lstm-64 batch 1024 bf16 17.2 ms a step against
  // 18.7, tf32 23.9 against 25.3, gpt2-small bf16 39.4 against 40.8);
  // DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=no, the GEMM and the bias kernel (null here).
  BiasGemm* bias_gemm = nullptr;
  // A stack of LSTM layers (lstm-32 and lstm-64 have two) runs as one cuDNN RNN of that many
  // layers, as PyTorch's nn.LSTM(num_layers) does, where cuDNN may run one layer's step beside
  // the next layer's; the workload then builds the stack as one layer (Device::runs_lstm_stacks),
  // whose gradients come at once. The default since it ran on an H200 (2026-11-27: its kernel and
  // training tests passed; lstm-64 batch 1024 bf16 15.7 ms a step against 18.7 a layer at a time,
  // tf32 23.4 against 25.3, fp32 84.4 against 89.5); DLSCALE_CUDNN_LSTM_STACK=no, a cuDNN call
  // per layer.
  bool lstm_stacks = true;
  // DLSCALE_CUDNN_BUILD_THREADS=N: the graph path's engine search builds the candidates of a
  // pass N at a time, each on a thread of its own (cudnn_graph_convolution.cpp), where one thread
  // builds them one after another (NVRTC's compiles above all: mobilenet-v2's first step took
  // 21.8 s on an H200, nearly all of it the search). The same engines are built and timed, one at
  // a time on the stream, so the choice is the one thread's; only the first step's wall time
  // changes. 1 (one thread) until it has run on a GPU: written 2026-11-27 without one.
  int engine_build_threads = 1;
  // DLSCALE_CUDNN_KERNEL_CACHE=yes: the graph path states its graphs as dynamic-shape graphs and
  // gives every graph of one topology (pass, variant, operand types, kernel size, stride,
  // padding, grouping: everything but the batch, channel and pixel counts) one cuDNN kernel
  // cache, so an engine that compiles its kernel at build time (NVRTC) compiles it once for all
  // shapes of that topology instead of once per shape, as the cuDNN frontend's dynamic-shape
  // convolution samples do. mobilenet-v2's bf16 search took 35 s of its first step on an H200
  // (2026-11-27), nearly all of it about 50 such compiles of 0.4 to 1.4 s, for depthwise layers
  // of 10 shapes and 2 topologies; eight build threads did not shorten it (the compiles do not
  // overlap). Dynamic-shape graphs may be offered other engines than static ones, so the steps
  // must be timed both ways before this becomes a default: off until it has run on a GPU
  // (written 2026-11-27 without one).
  bool kernel_cache = false;
  // DLSCALE_CUDNN_PRUNED_SEARCH=yes: the graph path's engine search skips two variants of a pass
  // that an H200 never chose (2026-11-28: vgg-16's and mobilenet-v2's bf16 searches, every
  // layer) but that cost most of their searches' NVRTC compiles: the forward graph that fuses the
  // bias without the ReLU where the graph fusing both found an engine (it does what that one does
  // and leaves the ReLU a pass of its own: 9.3 of vgg-16's 23.3 s), and, under bf16, the filter
  // gradient written in float where the one written in bf16 found an engine (widening a weight
  // gradient is a pass over the weights alone: 3.7 s of vgg-16's, 8.2 of mobilenet-v2's 32.3 s).
  // Off until a GPU has timed the searches and steps both ways: written 2026-11-28 without one.
  bool pruned_search = false;
  // DLSCALE_CUDA_FAST_DIVMOD (default yes, no for the old way): the NHWC pooling and batch norm
  // kernels split each flat index into its coordinates by FastDivmod's multiply and shift
  // (fast_divmod.hpp) instead of 64-bit integer division, where their tensors have fewer than
  // 2^31 elements: the same values, so the same results bit for bit (its test passed on an H200,
  // 2026-11-28). alexnet-r's three max poolings took 0.63 ms of its 2.46 ms tf32 step
  // (2026-11-27), each element paying some six divisions; with FastDivmod its step went 2.48 ->
  // 2.25 ms, resnet-50's bf16 step 18.33 -> 18.06 and mobilenet-v2's 10.81 -> 10.66 (2026-11-28).
  bool fast_divmod = true;
  // DLSCALE_CUDA_NCHW_BIAS_RELU=fused: the legacy path's convolutions add the bias and apply the
  // fused ReLU to their output in one pass, and mask dy by the ReLU and sum the bias gradient in
  // one pass, of dlscale's own kernels (channel_kernels.hpp), where cuDNN's descriptor API
  // makes two each way: an H200 profile of alexnet-r at batch 1024 in fp32 (2026-11-28) had its
  // three convolutions' backward at 3.69 ms where PyTorch's take 1.69 with the bias and ReLU, and
  // PyTorch sums its bias gradient with a plain reduction. No atomics, so results repeat bit for
  // bit. The default stays cudnn: written 2026-11-28 without a GPU; off until it has run on one.
  NchwBiasRelu nchw_bias_relu = NchwBiasRelu::cudnn;
  // DLSCALE_CUDA_NCHW_POOLING=own: the legacy path pools on dlscale's own kernels, those the graph
  // path has run since 2026-11-26 in NHWC (pooling_kernels.hpp), here enumerating NCHW. An H200
  // profile of alexnet-r at batch 1024 in fp32 (2026-11-28) had cuDNN's three max poolings'
  // backward at 0.61, 0.16 and 0.08 ms, where PyTorch's three take 0.52 together. The default
  // stays cudnn: written 2026-11-28 without a GPU; off until it has run on one.
  NchwPooling nchw_pooling = NchwPooling::cudnn;
  // DLSCALE_CUDA_NCHW_BATCH_NORM=own: the legacy path's batch norm on dlscale's own kernels, those
  // the graph path has normalized NHWC images with since 2026-11-26, here summing NCHW images.
  // resnet-50's fp32 step (legacy) was 0.99 of PyTorch's speed on an H200 in two leases
  // (2026-11-27 and 28), where both run cuDNN's convolutions and batch norm; cuDNN's batch norm
  // with a ReLU makes two more passes over the images each way, which the own kernels fold into
  // the normalizing and gradient passes. The default stays cudnn: written 2026-11-28 without a
  // GPU; off until it has run on one.
  NchwBatchNorm nchw_batch_norm = NchwBatchNorm::cudnn;
  ImageActivations image_activations = ImageActivations::bf16;  // as asked; see native_is_bf16

  // ImageLayout::native on this device: NHWC on the graph path (what cuDNN's tensor-core
  // convolutions read and write), NCHW on the legacy one.
  bool native_is_nhwc() const { return cudnn_api == CudnnApi::graph; }
  // And its element type: bf16 (unless asked for float) on the graph path under bf16 (every
  // kernel that reads or writes ImageLayout::native then reads or writes bf16), else float.
  bool native_is_bf16() const {
    return native_is_nhwc() && precision == Precision::bf16 &&
           image_activations == ImageActivations::bf16;
  }

  // The cuDNN math type for float tensors: FMA only for fp32; for tf32 the default math, which
  // lets float tensors onto tensor cores in TF32 (PyTorch's allow_tf32 asks for the same).
  // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION would also let cuDNN convert float data to FP16, whose
  // range ends at 65504: a different precision from the one the run names. Under bf16 the kernels
  // that stay in float (the float LSTM) compute as under fp32; convolutions, which run on bf16
  // tensors there, take tensor cores (cudnn_image_kernels.cpp).
  cudnnMathType_t cudnn_math() const {
    return precision == Precision::tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  }
};

}  // namespace dlscale::kernels
