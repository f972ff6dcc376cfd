// The CPU device: host memory, OpenBLAS for GEMM, oneDNN for convolution and pooling, OpenMP
// loops for the element-wise kernels.
#pragma once

#include <memory>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/dnnl_elementwise.hpp"
#include "kernels/cpu/dnnl_image_layouts.hpp"
#include "kernels/cpu/dnnl_matmul.hpp"
#include "kernels/cpu/fastest_float_gemm.hpp"
#include "kernels/device.hpp"

namespace dlscale::kernels {

class CpuDevice final : public Device {
 public:
  // Sets the thread count of both OpenBLAS and OpenMP for this process. Under Precision::bf16,
  // GEMMs, convolutions and the LSTM read bf16 copies of their inputs (oneDNN, float
  // accumulation); pooling, batch norm and the element-wise kernels stay float.
  explicit CpuDevice(int compute_threads, Precision precision = Precision::fp32);
  ~CpuDevice() override;

  std::string description() const override;
  DeviceProperties properties() const override;
  int compute_threads() const override { return compute_threads_; }
  std::size_t free_memory_bytes() const override;
  bool memory_is_host() const override { return true; }

  void* allocate(std::size_t bytes) override;
  void deallocate(void* pointer) noexcept override;
  void copy_to_device(void* device_destination, const void* host_source,
                      std::size_t bytes) override;
  void copy_to_host(void* host_destination, const void* device_source, std::size_t bytes) override;
  void copy_on_device(void* destination, const void* source, std::size_t bytes) override;
  // CPU kernels return when their work is done: nothing is ever queued, so an event is simply
  // the time it was recorded at, and there is nothing to capture.
  void synchronize() override {}
  std::unique_ptr<DeviceEvent> make_event() override;
  void record(DeviceEvent& event) override;
  double elapsed_seconds(const DeviceEvent& from, const DeviceEvent& to) override;
  void wait(const DeviceEvent& /*event*/) override {}
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& /*work*/) override {
    return nullptr;
  }

  std::unique_ptr<ConvolutionKernel> make_convolution(const ConvolutionGeometry& geometry) override;
  std::unique_ptr<PoolingKernel> make_pooling(const PoolingGeometry& geometry) override;
  std::unique_ptr<BatchNormKernel> make_batch_norm(const BatchNormGeometry& geometry) override;
  std::unique_ptr<LstmKernel> make_lstm(const LstmGeometry& geometry) override;

  MathOps<float>& math_float() override;
  MathOps<double>& math_double() override;

  // What ImageLayout::native means on this CPU.
  const DnnlImageLayouts& image_layouts() const { return image_layouts_; }

 private:
  int compute_threads_;
  Precision precision_;
  dnnl::engine dnnl_engine_;
  dnnl::stream dnnl_stream_;
  DnnlImageLayouts image_layouts_;
  std::unique_ptr<DnnlMatmul> float_matmul_;
  std::unique_ptr<FastestFloatGemm> float_gemm_;
  std::unique_ptr<DnnlElementwise> float_elementwise_;
  std::unique_ptr<MathOps<float>> math_float_;
  std::unique_ptr<MathOps<double>> math_double_;
};

// The BLAS library this build calls, as it describes itself.
std::string cpu_blas_description();

}  // namespace dlscale::kernels
