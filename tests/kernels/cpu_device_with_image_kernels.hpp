// The CPU device with its image kernels swapped for others, for tests that run a whole network
// on kernels of their choice (plain NCHW oneDNN, exact double-precision oracles): everything
// else (memory, math, events) is the CPU device's. Subclasses override the make_* they replace:
// PlainLayoutCpu below is one.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kernels/cpu/cpu_device.hpp"

namespace dlscale::testing {

class CpuDeviceWithImageKernels : public kernels::Device {
 public:
  CpuDeviceWithImageKernels() : cpu_(1) {}

  std::string description() const override { return cpu_.description(); }
  kernels::DeviceProperties properties() const override { return cpu_.properties(); }
  int compute_threads() const override { return cpu_.compute_threads(); }
  std::size_t free_memory_bytes() const override { return cpu_.free_memory_bytes(); }
  bool memory_is_host() const override { return true; }
  void* allocate(std::size_t bytes) override { return cpu_.allocate(bytes); }
  void deallocate(void* pointer) noexcept override { cpu_.deallocate(pointer); }
  void copy_to_device(void* destination, const void* source, std::size_t bytes) override {
    cpu_.copy_to_device(destination, source, bytes);
  }
  void copy_to_host(void* destination, const void* source, std::size_t bytes) override {
    cpu_.copy_to_host(destination, source, bytes);
  }
  void copy_on_device(void* destination, const void* source, std::size_t bytes) override {
    cpu_.copy_on_device(destination, source, bytes);
  }
  void synchronize() override {}
  std::unique_ptr<kernels::DeviceEvent> make_event() override { return cpu_.make_event(); }
  void record(kernels::DeviceEvent& event) override { cpu_.record(event); }
  double elapsed_seconds(const kernels::DeviceEvent& from,
                         const kernels::DeviceEvent& to) override {
    return cpu_.elapsed_seconds(from, to);
  }
  void wait(const kernels::DeviceEvent& event) override { cpu_.wait(event); }
  std::unique_ptr<kernels::CapturedWork> capture(const std::function<void()>&) override {
    return nullptr;
  }
  std::unique_ptr<kernels::ConvolutionKernel> make_convolution(
      const kernels::ConvolutionGeometry& geometry) override {
    return cpu_.make_convolution(geometry);
  }
  std::unique_ptr<kernels::PoolingKernel> make_pooling(
      const kernels::PoolingGeometry& geometry) override {
    return cpu_.make_pooling(geometry);
  }
  std::unique_ptr<kernels::BatchNormKernel> make_batch_norm(
      const kernels::BatchNormGeometry& geometry) override {
    return cpu_.make_batch_norm(geometry);
  }
  std::unique_ptr<kernels::LstmKernel> make_lstm(const kernels::LstmGeometry& geometry) override {
    return cpu_.make_lstm(geometry);
  }
  kernels::MathOps<float>& math_float() override { return cpu_.math_float(); }
  kernels::MathOps<double>& math_double() override { return cpu_.math_double(); }

 protected:
  kernels::CpuDevice cpu_;
};

// The CPU device with every image kernel in plain NCHW instead of its blocked layout.
class PlainLayoutCpu final : public CpuDeviceWithImageKernels {
 public:
  std::unique_ptr<kernels::ConvolutionKernel> make_convolution(
      const kernels::ConvolutionGeometry& geometry) override {
    kernels::ConvolutionGeometry plain = geometry;
    plain.input_layout = plain.output_layout = kernels::ImageLayout::nchw;
    return cpu_.make_convolution(plain);
  }
  std::unique_ptr<kernels::PoolingKernel> make_pooling(
      const kernels::PoolingGeometry& geometry) override {
    kernels::PoolingGeometry plain = geometry;
    plain.input_layout = plain.output_layout = kernels::ImageLayout::nchw;
    return cpu_.make_pooling(plain);
  }
  std::unique_ptr<kernels::BatchNormKernel> make_batch_norm(
      const kernels::BatchNormGeometry& geometry) override {
    kernels::BatchNormGeometry plain = geometry;
    plain.layout = kernels::ImageLayout::nchw;
    return cpu_.make_batch_norm(plain);
  }
};

}  // namespace dlscale::testing
