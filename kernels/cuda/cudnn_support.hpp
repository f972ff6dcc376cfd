// What the cuDNN kernels share: owning descriptors, owned device buffers, and the check that
// set-up (algorithm search, allocation) never happens inside a graph capture.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.hpp"

namespace dlscale::kernels {

// An owning cuDNN descriptor, created with the object and destroyed with it.
template <typename Handle, cudnnStatus_t (*create)(Handle*), cudnnStatus_t (*destroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { DLSCALE_CUDNN_CHECK(create(&handle_)); }
  ~CudnnDescriptor() { destroy(handle_); }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  operator Handle() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                         cudnnDestroyTensorDescriptor>;

// Device memory a kernel owns: allocated on a first call, never while a step runs.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) DLSCALE_CUDA_CHECK(cudaMalloc(&data_, bytes));
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }

  void* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Searching for algorithms, sizing and allocating belong to the first call for a batch size,
// which the training loop makes before it captures a step; inside a capture they would fail, or
// bake a search's scratch pointers into the graph. Says so plainly instead.
inline void require_not_capturing(cudaStream_t stream, const char* what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  DLSCALE_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status != cudaStreamCaptureStatusNone)
    throw std::logic_error(std::string(what) +
                           ": the first call for a batch size must run before graph capture");
}

}  // namespace dlscale::kernels
