// The CUDA device: handles and stream set up once, events for timing, graphs for replay, and the
// factories that hand the shared context to the cuBLAS and cuDNN kernels.
#include "kernels/cuda/cuda_device.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/enum_names.hpp"
#include "core/errors.hpp"
#include "core/printable_text.hpp"

#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/channel_kernels.hpp"
#include "kernels/cuda/cublaslt_bias_gemm.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_math.hpp"
#include "kernels/cuda/cudnn_image_kernels.hpp"
#include "kernels/cuda/cudnn_lstm_kernel.hpp"
#include "kernels/cuda/pooling_kernels.hpp"
#ifdef DLSCALE_HAVE_CUDNN_FRONTEND
#include "kernels/cuda/cudnn_attention.hpp"
#include "kernels/cuda/cudnn_graph_convolution.hpp"
#endif

namespace dlscale::kernels {

namespace {

// cuBLAS takes its scratch from this buffer instead of allocating, which a graph capture forbids.
constexpr std::size_t cublas_workspace_bytes = 32u << 20;

class CudaEvent final : public DeviceEvent {
 public:
  CudaEvent() { DLSCALE_CUDA_CHECK(cudaEventCreate(&event_)); }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaGraph final : public CapturedWork {
 public:
  CudaGraph(cudaGraphExec_t graph, cudaStream_t stream) : graph_(graph), stream_(stream) {}
  ~CudaGraph() override { cudaGraphExecDestroy(graph_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  void replay() override { DLSCALE_CUDA_CHECK(cudaGraphLaunch(graph_, stream_)); }

 private:
  cudaGraphExec_t graph_;
  cudaStream_t stream_;
};

std::string version_text(int packed, int major_divisor, int minor_divisor) {
  return fmt::format("{}.{}", packed / major_divisor, packed % major_divisor / minor_divisor);
}

// DLSCALE_CUDNN_WORKSPACE_MIB: the most workspace one convolution algorithm may ask for, in MiB.
std::size_t workspace_limit_from(const std::string& mib) {
  constexpr std::size_t most_mib = std::size_t(1) << 20;  // 1 TiB: beyond any GPU's memory
  const bool digits =
      !mib.empty() && mib.size() <= 7 &&
      std::all_of(mib.begin(), mib.end(), [](char c) { return c >= '0' && c <= '9'; });
  const std::size_t value = digits ? std::stoull(mib) : 0;
  if (value == 0 || value > most_mib)
    throw UserError(fmt::format(
        "DLSCALE_CUDNN_WORKSPACE_MIB: '{}' is not a whole number of MiB from 1 to {} (the most "
        "workspace one convolution algorithm may ask for; default {})",
        printable(mib), most_mib, default_convolution_workspace_limit >> 20));
  return value << 20;
}

// A setting that names one of an enum's values (EnumNames), from the environment: where the
// variable is set and not empty, `target` becomes the value it names; a name that is none of them
// is one line (require_choice).
template <typename Enum, std::size_t count>
void read_setting(Enum& target, const char* variable, std::string_view what,
                  const EnumNames<Enum, count>& names) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return;
  require_choice(variable, what, value, names.all());
  target = *names.named(value);
}

// DLSCALE_CUDNN_BUILD_THREADS: how many of a pass's candidate engines the graph path builds at
// once (cuda_context.hpp).
int engine_build_threads_from(const std::string& threads) {
  constexpr int most_threads = 64;
  const bool digits =
      !threads.empty() && threads.size() <= 3 &&
      std::all_of(threads.begin(), threads.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int value = digits ? std::stoi(threads) : 0;
  if (value < 1 || value > most_threads)
    throw UserError(fmt::format(
        "DLSCALE_CUDNN_BUILD_THREADS: '{}' is not a number of threads from 1 to {} (how many "
        "candidate engines of a convolution the graph path builds at once; default 1)",
        printable(threads), most_threads));
  return value;
}

}  // namespace

cudaEvent_t cuda_event_of(const DeviceEvent& event) {
  return static_cast<const CudaEvent&>(event).get();
}

std::optional<CudnnApi> cudnn_api_from_environment() {
  const char* value = std::getenv("DLSCALE_CUDNN_API");
  if (value == nullptr || std::string(value).empty()) return std::nullopt;
  require_choice("DLSCALE_CUDNN_API", "cuDNN API", value, cudnn_api_names.all());
  return *cudnn_api_names.named(value);
}

bool cudnn_graph_api_compiled() {
#ifdef DLSCALE_HAVE_CUDNN_FRONTEND
  return true;
#else
  return false;
#endif
}

int visible_gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error; the answer is simply none
    return 0;
  }
  return count;
}

CudnnApi default_cudnn_api(Precision precision) {
  return precision != Precision::fp32 && cudnn_graph_api_compiled() ? CudnnApi::graph
                                                                    : CudnnApi::legacy;
}

CudaDevice::CudaDevice(int gpu_index, Precision precision, std::optional<CudnnApi> asked_api)
    : bf16_staging_(std::make_unique<Bf16Staging>()) {
  const CudnnApi cudnn_api = asked_api.value_or(default_cudnn_api(precision));
  if (cudnn_api == CudnnApi::graph && !cudnn_graph_api_compiled())
    throw UserError(
        "DLSCALE_CUDNN_API=graph: this build has no cuDNN graph path (configured without the cuDNN "
        "frontend: run scripts/fetch-cudnn-frontend.sh and configure again), or unset it");
  context_.device = gpu_index;
  context_.precision = precision;
  context_.cudnn_api = cudnn_api;
#ifdef DLSCALE_HAVE_CUDNN_FRONTEND
  if (cudnn_api == CudnnApi::graph) {
    convolution_graphs_ = make_convolution_graph_cache();
    context_.convolution_graphs = convolution_graphs_.get();
  }
#endif
  context_.bf16_staging = bf16_staging_.get();
  if (const char* mib = std::getenv("DLSCALE_CUDNN_WORKSPACE_MIB"); mib != nullptr && *mib != '\0')
    context_.convolution_workspace_limit = workspace_limit_from(mib);
  convolution_workspace_ =
      std::make_unique<ConvolutionWorkspace>(context_.convolution_workspace_limit);
  context_.convolution_workspace = convolution_workspace_.get();
  if (const char* batched = std::getenv("DLSCALE_CUDA_BATCHED_GEMM");
      batched != nullptr && *batched != '\0') {
    require_choice("DLSCALE_CUDA_BATCHED_GEMM", "batched GEMM", batched, {"loop", "cublas"});
    context_.cublas_strided_batched = std::string(batched) == "cublas";
  }
  if (const char* tiled = std::getenv("DLSCALE_CUDA_LAYER_NORM_GRADIENT");
      tiled != nullptr && *tiled != '\0') {
    require_choice("DLSCALE_CUDA_LAYER_NORM_GRADIENT", "layer norm gradient", tiled,
                   {"serial", "tiled"});
    context_.tiled_layer_norm_gradient = std::string(tiled) == "tiled";
  }
  read_setting(context_.padded_bf16_rows, "DLSCALE_CUDA_PADDED_BF16_ROWS", "padded bf16 rows",
               yes_no_names);
  read_setting(context_.batched_loads, "DLSCALE_CUDA_BATCHED_LOADS", "batched loads", yes_no_names);
  bool bias_epilogue = true;
  read_setting(bias_epilogue, "DLSCALE_CUDA_GEMM_BIAS_EPILOGUE", "GEMM bias epilogue",
               yes_no_names);
  read_setting(context_.lstm_stacks, "DLSCALE_CUDNN_LSTM_STACK", "LSTM stack", yes_no_names);
  if (const char* threads = std::getenv("DLSCALE_CUDNN_BUILD_THREADS");
      threads != nullptr && *threads != '\0')
    context_.engine_build_threads = engine_build_threads_from(threads);
  read_setting(context_.kernel_cache, "DLSCALE_CUDNN_KERNEL_CACHE", "kernel cache", yes_no_names);
  read_setting(context_.pruned_search, "DLSCALE_CUDNN_PRUNED_SEARCH", "pruned search",
               yes_no_names);
  read_setting(context_.fast_divmod, "DLSCALE_CUDA_FAST_DIVMOD", "fast divmod", yes_no_names);
  read_setting(context_.nchw_bias_relu, "DLSCALE_CUDA_NCHW_BIAS_RELU", "NCHW bias and ReLU",
               nchw_bias_relu_names);
  read_setting(context_.nchw_pooling, "DLSCALE_CUDA_NCHW_POOLING", "NCHW pooling",
               nchw_pooling_names);
  read_setting(context_.nchw_batch_norm, "DLSCALE_CUDA_NCHW_BATCH_NORM", "NCHW batch norm",
               nchw_batch_norm_names);
  read_setting(context_.image_activations, "DLSCALE_CUDA_IMAGE_ACTIVATIONS",
               "image activation type", image_activation_names);
  if (const char* attention = std::getenv("DLSCALE_CUDNN_ATTENTION");
      attention != nullptr && *attention != '\0') {
    require_choice("DLSCALE_CUDNN_ATTENTION", "attention", attention, attention_api_names.all());
    context_.attention = *attention_api_names.named(attention);
    context_.attention_asked = true;
    if (context_.attention == AttentionApi::sdpa && !cudnn_graph_api_compiled())
      throw UserError(
          "DLSCALE_CUDNN_ATTENTION=sdpa: this build has no cuDNN frontend (run "
          "scripts/fetch-cudnn-frontend.sh and configure again), or unset it");
  }
  DLSCALE_CUDA_CHECK(cudaSetDevice(gpu_index));
  DLSCALE_CUDA_CHECK(cudaStreamCreateWithFlags(&context_.stream, cudaStreamNonBlocking));
  DLSCALE_CUBLAS_CHECK(cublasCreate(&context_.cublas));
  DLSCALE_CUBLAS_CHECK(cublasSetStream(context_.cublas, context_.stream));
  DLSCALE_CUDA_CHECK(cudaMalloc(&cublas_workspace_, cublas_workspace_bytes));
  DLSCALE_CUBLAS_CHECK(
      cublasSetWorkspace(context_.cublas, cublas_workspace_, cublas_workspace_bytes));
  DLSCALE_CUDNN_CHECK(cudnnCreate(&context_.cudnn));
  DLSCALE_CUDNN_CHECK(cudnnSetStream(context_.cudnn, context_.stream));
  if (bias_epilogue) {
    bias_gemm_ = std::make_unique<BiasGemm>();
    context_.bias_gemm = bias_gemm_.get();
  }
  math_float_ = make_cuda_math_float(context_);
  math_double_ = make_cuda_math_double(context_);
}

CudaDevice::~CudaDevice() {
  math_float_.reset();
  math_double_.reset();
  if (context_.stream != nullptr) cudaStreamSynchronize(context_.stream);
  bias_gemm_.reset();
  convolution_graphs_.reset();  // its execution plans before the cuDNN handle they were made with
  if (context_.cudnn != nullptr) cudnnDestroy(context_.cudnn);
  if (context_.cublas != nullptr) cublasDestroy(context_.cublas);
  if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
  if (context_.stream != nullptr) cudaStreamDestroy(context_.stream);
}

std::string CudaDevice::description() const {
  cudaDeviceProp properties{};
  DLSCALE_CUDA_CHECK(cudaGetDeviceProperties(&properties, context_.device));
  return properties.name;
}

DeviceProperties CudaDevice::properties() const {
  cudaDeviceProp gpu{};
  DLSCALE_CUDA_CHECK(cudaGetDeviceProperties(&gpu, context_.device));
  int driver = 0, runtime = 0, sm_clock_khz = 0, memory_clock_khz = 0, cublas = 0;
  DLSCALE_CUDA_CHECK(cudaDriverGetVersion(&driver));
  DLSCALE_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  DLSCALE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, context_.device));
  DLSCALE_CUDA_CHECK(
      cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, context_.device));
  DLSCALE_CUBLAS_CHECK(cublasGetVersion(context_.cublas, &cublas));
  const auto cudnn = int(cudnnGetVersion());  // 91400 for 9.14.0
  DeviceProperties result{
      {"gpu_name", gpu.name},
      {"gpu_index", std::to_string(context_.device)},
      {"gpu_memory_bytes", std::to_string(gpu.totalGlobalMem)},
      {"gpu_multiprocessors", std::to_string(gpu.multiProcessorCount)},
      {"compute_capability", fmt::format("{}.{}", gpu.major, gpu.minor)},
      {"sm_clock_mhz", std::to_string(sm_clock_khz / 1000)},
      {"memory_clock_mhz", std::to_string(memory_clock_khz / 1000)},
      {"cuda_driver", version_text(driver, 1000, 10)},
      {"cuda_runtime", version_text(runtime, 1000, 10)},
      {"cublas", fmt::format("{}.{}.{}", cublas / 10000, cublas % 10000 / 100, cublas % 100)},
      {blas_property,
       fmt::format("cuBLAS {}.{}.{}", cublas / 10000, cublas % 10000 / 100, cublas % 100)},
      {"cudnn", fmt::format("{}.{}.{}", cudnn / 10000, cudnn % 10000 / 100, cudnn % 100)},
      {"precision", precision_name(context_.precision)},
      // Which path the convolutions took, and with it the native layout (NCHW or NHWC).
      {"cudnn_api", cudnn_api_name(context_.cudnn_api)},
      // The element type of images between layers (bf16 only on the graph path under bf16).
      {"image_activations",
       image_activation_names(context_.native_is_bf16() ? ImageActivations::bf16
                                                        : ImageActivations::float32)},
      // How a GPT's attention ran: the fused cuDNN one only under bf16 (make_attention).
      {"attention",
       attention_api_names(fused_attention() && !last_attention_composed_ ? AttentionApi::sdpa
                                                                          : AttentionApi::gemm)},
      // Recorded as they ran, whatever the defaults of the version that wrote the file: all four
      // became defaults on 2026-11-27 (padded rows and batched loads in 4ea8762, the bias
      // epilogue and the LSTM stack later), so changed_settings alone reads differently before.
      {"padded_bf16_rows",
       yes_no_names(context_.padded_bf16_rows && context_.precision == Precision::bf16)},
      {"batched_loads", yes_no_names(context_.batched_loads)},
      {"gemm_bias_epilogue", yes_no_names(context_.bias_gemm != nullptr)},
      {"lstm_stack", yes_no_names(context_.lstm_stacks)},
  };
#ifdef DLSCALE_CUDNN_FRONTEND_VERSION
  if (context_.cudnn_api == CudnnApi::graph)
    result.emplace_back("cudnn_frontend", DLSCALE_CUDNN_FRONTEND_VERSION);
#endif
  // The settings that ran other than their defaults (cuda_context.hpp), for the summary's device
  // line: where they changed what this precision and path run.
  std::vector<std::string> changed;
  if (context_.native_is_nhwc() && context_.precision == Precision::bf16 &&
      context_.image_activations != ImageActivations::bf16)
    changed.push_back(
        fmt::format("image_activations {}", image_activation_names(context_.image_activations)));
  if (context_.precision == Precision::bf16 && context_.attention != AttentionApi::sdpa)
    changed.push_back(fmt::format("attention {}", attention_api_names(context_.attention)));
  if (!context_.tiled_layer_norm_gradient) changed.push_back("layer_norm_gradient serial");
  if (!context_.padded_bf16_rows && context_.precision == Precision::bf16)
    changed.push_back(fmt::format("padded_bf16_rows {}", yes_no_names(false)));
  if (!context_.batched_loads)
    changed.push_back(fmt::format("batched_loads {}", yes_no_names(false)));
  if (context_.bias_gemm == nullptr)
    changed.push_back(fmt::format("gemm_bias_epilogue {}", yes_no_names(false)));
  if (!context_.lstm_stacks) changed.push_back(fmt::format("lstm_stack {}", yes_no_names(false)));
  if (context_.convolution_workspace_limit != default_convolution_workspace_limit)
    changed.push_back(
        fmt::format("convolution_workspace_mib {}", context_.convolution_workspace_limit >> 20));
  if (context_.engine_build_threads != 1 && context_.cudnn_api == CudnnApi::graph)
    changed.push_back(fmt::format("cudnn_build_threads {}", context_.engine_build_threads));
  if (context_.kernel_cache && context_.cudnn_api == CudnnApi::graph)
    changed.push_back(fmt::format("cudnn_kernel_cache {}", yes_no_names(true)));
  if (context_.pruned_search && context_.cudnn_api == CudnnApi::graph)
    changed.push_back(fmt::format("cudnn_pruned_search {}", yes_no_names(true)));
  // FastDivmod indexes dlscale's own image kernels: the graph path's, and the legacy path's
  // where a setting asks for them.
  const bool own_image_kernels =
      context_.native_is_nhwc() || context_.nchw_bias_relu == NchwBiasRelu::fused ||
      context_.nchw_pooling == NchwPooling::own || context_.nchw_batch_norm == NchwBatchNorm::own;
  if (!context_.fast_divmod && own_image_kernels)
    changed.push_back(fmt::format("fast_divmod {}", yes_no_names(false)));
  if (context_.nchw_bias_relu != NchwBiasRelu::cudnn && context_.cudnn_api == CudnnApi::legacy)
    changed.push_back(
        fmt::format("nchw_bias_relu {}", nchw_bias_relu_names(context_.nchw_bias_relu)));
  if (context_.nchw_pooling != NchwPooling::cudnn && context_.cudnn_api == CudnnApi::legacy)
    changed.push_back(fmt::format("nchw_pooling {}", nchw_pooling_names(context_.nchw_pooling)));
  if (context_.nchw_batch_norm != NchwBatchNorm::cudnn && context_.cudnn_api == CudnnApi::legacy)
    changed.push_back(
        fmt::format("nchw_batch_norm {}", nchw_batch_norm_names(context_.nchw_batch_norm)));
  if (!changed.empty())
    result.emplace_back("changed_settings", fmt::format("{}", fmt::join(changed, ", ")));
  return result;
}

std::size_t CudaDevice::free_memory_bytes() const {
  std::size_t free_bytes = 0, total_bytes = 0;
  DLSCALE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

void* CudaDevice::allocate(std::size_t bytes) {
  void* pointer = nullptr;
  DLSCALE_CUDA_CHECK(cudaMalloc(&pointer, std::max<std::size_t>(bytes, 1)));
  return pointer;
}

void CudaDevice::deallocate(void* pointer) noexcept { cudaFree(pointer); }

// Copies to the device are ordered on the compute stream and complete before returning, so the
// host buffer may be freed at once.
void CudaDevice::copy_to_device(void* device_destination, const void* host_source,
                                std::size_t bytes) {
  DLSCALE_CUDA_CHECK(cudaMemcpyAsync(device_destination, host_source, bytes, cudaMemcpyHostToDevice,
                                     context_.stream));
  synchronize();
}

void CudaDevice::copy_to_host(void* host_destination, const void* device_source,
                              std::size_t bytes) {
  DLSCALE_CUDA_CHECK(cudaMemcpyAsync(host_destination, device_source, bytes, cudaMemcpyDeviceToHost,
                                     context_.stream));
  synchronize();
}

void CudaDevice::copy_on_device(void* destination, const void* source, std::size_t bytes) {
  DLSCALE_CUDA_CHECK(
      cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, context_.stream));
}

void CudaDevice::synchronize() { DLSCALE_CUDA_CHECK(cudaStreamSynchronize(context_.stream)); }

std::unique_ptr<DeviceEvent> CudaDevice::make_event() { return std::make_unique<CudaEvent>(); }

void CudaDevice::record(DeviceEvent& event) {
  // Inside a capture a plain record only orders streams; the external flag makes it a timing
  // node of the graph, recorded at every replay.
  DLSCALE_CUDA_CHECK(cudaEventRecordWithFlags(cuda_event_of(event), context_.stream,
                                              capturing_ ? cudaEventRecordExternal : 0));
}

double CudaDevice::elapsed_seconds(const DeviceEvent& from, const DeviceEvent& to) {
  DLSCALE_CUDA_CHECK(cudaEventSynchronize(cuda_event_of(to)));
  float milliseconds = 0;
  DLSCALE_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, cuda_event_of(from), cuda_event_of(to)));
  return milliseconds * 1e-3;
}

void CudaDevice::wait(const DeviceEvent& event) {
  DLSCALE_CUDA_CHECK(cudaEventSynchronize(cuda_event_of(event)));
}

std::unique_ptr<CapturedWork> CudaDevice::capture(const std::function<void()>& work) {
  // Thread-local mode: the MPI and host threads of this process may keep using CUDA meanwhile.
  DLSCALE_CUDA_CHECK(cudaStreamBeginCapture(context_.stream, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  cudaGraph_t graph = nullptr;
  try {
    work();
  } catch (...) {
    capturing_ = false;
    cudaStreamEndCapture(context_.stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  capturing_ = false;
  DLSCALE_CUDA_CHECK(cudaStreamEndCapture(context_.stream, &graph));
  cudaGraphExec_t executable = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&executable, graph, 0);
  cudaGraphDestroy(graph);
  DLSCALE_CUDA_CHECK(instantiated);
  return std::make_unique<CudaGraph>(executable, context_.stream);
}

std::unique_ptr<ConvolutionKernel> CudaDevice::make_convolution(
    const ConvolutionGeometry& geometry) {
#ifdef DLSCALE_HAVE_CUDNN_FRONTEND
  if (context_.cudnn_api == CudnnApi::graph)
    return make_cudnn_graph_convolution(context_, geometry);
#endif
  return make_cudnn_convolution(context_, geometry);
}

std::unique_ptr<PoolingKernel> CudaDevice::make_pooling(const PoolingGeometry& geometry) {
  // NHWC input (the graph path): dlscale's own kernels, faster there than cuDNN's
  // (pooling_kernels.hpp); NCHW ones where DLSCALE_CUDA_NCHW_POOLING=own asks for them and they
  // take the window (else cuDNN's, as by default).
  if (geometry.input_layout == ImageLayout::native && context_.native_is_nhwc())
    return make_dlscale_pooling(context_, geometry);
  if (context_.cudnn_api == CudnnApi::legacy && context_.nchw_pooling == NchwPooling::own &&
      dlscale_pooling_supports(geometry))
    return make_dlscale_pooling(context_, geometry);
  // cuDNN's pooling writes float; no zoo network pools its NCHW input data into a native image.
  if (geometry.output_layout == ImageLayout::native && context_.native_is_bf16())
    throw std::invalid_argument(
        "bf16 images: pooling of the input data into one is not supported "
        "(DLSCALE_CUDA_IMAGE_ACTIVATIONS=float keeps float images)");
  return make_cudnn_pooling(context_, geometry);
}

std::unique_ptr<BatchNormKernel> CudaDevice::make_batch_norm(const BatchNormGeometry& geometry) {
  // cuDNN's descriptor-API batch norm is slow on NHWC tensors (H200: most of resnet-50's step on
  // the graph path), so NHWC runs dlscale's own kernels.
  if (geometry.layout == ImageLayout::native && context_.native_is_nhwc())
    return make_dlscale_batch_norm(context_, geometry);
  // NCHW ones too where DLSCALE_CUDA_NCHW_BATCH_NORM=own asks for them.
  if (context_.cudnn_api == CudnnApi::legacy && context_.nchw_batch_norm == NchwBatchNorm::own)
    return make_dlscale_batch_norm(context_, geometry);
  return make_cudnn_batch_norm(context_, geometry);
}

std::unique_ptr<LstmKernel> CudaDevice::make_lstm(const LstmGeometry& geometry) {
  if (geometry.layers != 1 && !runs_lstm_stacks())
    throw std::logic_error("an LSTM stack on the GPU needs DLSCALE_CUDNN_LSTM_STACK=yes");
  return make_cudnn_lstm(context_, geometry);
}

bool CudaDevice::runs_lstm_stacks() const { return context_.lstm_stacks; }

bool CudaDevice::fused_attention() const {
  return context_.attention == AttentionApi::sdpa && context_.precision == Precision::bf16 &&
         cudnn_graph_api_compiled();
}

std::unique_ptr<AttentionKernel> CudaDevice::make_attention(const AttentionGeometry& geometry) {
  last_attention_composed_ = true;
  if (!fused_attention()) return nullptr;
#ifdef DLSCALE_HAVE_CUDNN_FRONTEND
  // By default, a model whose heads cuDNN may not run keeps the composed attention (the attention
  // property says so); asked for, sdpa tries them, and refuses what cuDNN cannot run in one line.
  int compute_capability_major = 0;
  DLSCALE_CUDA_CHECK(cudaDeviceGetAttribute(&compute_capability_major,
                                            cudaDevAttrComputeCapabilityMajor, context_.device));
  if (context_.attention_asked ||
      cudnn_attention_runs_everywhere(geometry, compute_capability_major)) {
    last_attention_composed_ = false;
    return make_cudnn_attention(context_, geometry);
  }
#endif
  (void)geometry;
  return nullptr;
}

MathOps<float>& CudaDevice::math_float() { return *math_float_; }
MathOps<double>& CudaDevice::math_double() { return *math_double_; }

}  // namespace dlscale::kernels
