// The CUDA device: one GPU, one compute stream, cuBLAS and cuDNN handles on it, CUDA events for
// timing and CUDA graphs for replaying a whole step. Memory is device memory, so gradients are
// summed by NCCL on the GPU or staged through the host for MPI.
#pragma once

#include <memory>
#include <optional>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/device.hpp"

namespace dlscale::kernels {

class Bf16Staging;
class ConvolutionGraphCache;

// DLSCALE_CUDNN_API from the environment: "legacy" or "graph", or none where it is unset or empty
// (then default_cudnn_api decides). Any other value is a UserError naming both. The one place
// the setting is read.
std::optional<CudnnApi> cudnn_api_from_environment();
// The cuDNN API a device of this precision takes unless told, where the build has the graph
// path: graph under bf16, where it ran faster than legacy on an H200 for every image model
// measured, and under tf32 (2026-11-27, H200: vgg-16 b64 36.6 ms a step against legacy's 85.3,
// resnet-50 b64 25.0 against 33.1; docs/gpu.md); legacy under fp32, where neither path was
// faster on every image case (2026-11-27, H200: graph faster for alexnet-r and mobilenet-v2,
// slower for alexnet-s, resnet-50 and resnet-56; docs/performance.md).
CudnnApi default_cudnn_api(Precision precision);
inline const char* cudnn_api_name(CudnnApi api) { return cudnn_api_names(api); }
// Whether this build has the graph path (it was configured with the cuDNN frontend).
bool cudnn_graph_api_compiled();

class CudaDevice final : public Device {
 public:
  // Takes GPU `gpu_index` (of those visible) for this process. `cudnn_api` picks the
  // convolutions' cuDNN API, and with it the native image layout (cuda_context.hpp); graph in a
  // build without the cuDNN frontend is refused with a UserError.
  // None: default_cudnn_api(precision).
  CudaDevice(int gpu_index, Precision precision,
             std::optional<CudnnApi> cudnn_api = cudnn_api_from_environment());
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string description() const override;
  DeviceProperties properties() const override;
  int compute_threads() const override { return 1; }
  std::size_t free_memory_bytes() const override;
  bool memory_is_host() const override { return false; }
  int gpu_index() const override { return context_.device; }

  void* allocate(std::size_t bytes) override;
  void deallocate(void* pointer) noexcept override;
  void copy_to_device(void* device_destination, const void* host_source,
                      std::size_t bytes) override;
  void copy_to_host(void* host_destination, const void* device_source, std::size_t bytes) override;
  void copy_on_device(void* destination, const void* source, std::size_t bytes) override;
  void synchronize() override;

  std::unique_ptr<DeviceEvent> make_event() override;
  void record(DeviceEvent& event) override;
  double elapsed_seconds(const DeviceEvent& from, const DeviceEvent& to) override;
  void wait(const DeviceEvent& event) override;
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& work) override;

  std::unique_ptr<ConvolutionKernel> make_convolution(const ConvolutionGeometry& geometry) override;
  std::unique_ptr<PoolingKernel> make_pooling(const PoolingGeometry& geometry) override;
  std::unique_ptr<BatchNormKernel> make_batch_norm(const BatchNormGeometry& geometry) override;
  std::unique_ptr<LstmKernel> make_lstm(const LstmGeometry& geometry) override;
  bool runs_lstm_stacks() const override;
  // cuDNN's fused attention under bf16 (DLSCALE_CUDNN_ATTENTION, default sdpa) where cuDNN reads
  // the model's heads; else none, and the layer composes it from GEMMs.
  std::unique_ptr<AttentionKernel> make_attention(const AttentionGeometry& geometry) override;

  MathOps<float>& math_float() override;
  MathOps<double>& math_double() override;

  // For the NCCL communicator: the GPU, and the stream whose work gradients come from.
  const CudaContext& context() const { return context_; }

 private:
  bool fused_attention() const;  // whether make_attention() makes cuDNN's
  // The last make_attention() left the attention to the layer's GEMMs (a model whose heads
  // cuDNN cannot read keeps them by default): the attention property then says gemm.
  bool last_attention_composed_ = false;

  CudaContext context_;
  void* cublas_workspace_ = nullptr;
  std::unique_ptr<Bf16Staging> bf16_staging_;  // allocates nothing until a bf16 kernel runs
  std::shared_ptr<ConvolutionGraphCache> convolution_graphs_;    // on the graph path only
  std::unique_ptr<ConvolutionWorkspace> convolution_workspace_;  // empty until a convolution runs
  std::unique_ptr<BiasGemm> bias_gemm_;  // null with DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=no
  bool capturing_ = false;
  std::unique_ptr<MathOps<float>> math_float_;
  std::unique_ptr<MathOps<double>> math_double_;
};

// The CUDA event behind a DeviceEvent made by a CudaDevice.
cudaEvent_t cuda_event_of(const DeviceEvent& event);

// GPUs this process can see (0 when there is no driver or no GPU).
int visible_gpu_count();

}  // namespace dlscale::kernels
