// What the cuDNN kernels share: owning descriptors, owned device buffers, the check that set-up
// (algorithm search, allocation) never happens inside a graph capture, and the per-batch-size
// plans made on a first call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/image_kernels.hpp"

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
// The RNN API's (the LSTM kernel, dlscale-bench-cudnn-lstm).
using RnnDescriptor =
    CudnnDescriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDescriptor = CudnnDescriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                                          cudnnDestroyRNNDataDescriptor>;
using DropoutDescriptor = CudnnDescriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                                          cudnnDestroyDropoutDescriptor>;

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

// A kernel's plan for a batch size, made by `prepare` on the first call for that size. A plan
// that fails to prepare is not kept. (A map, so plans never move once made.)
template <typename Plan, typename Prepare>
Plan& plan_of(std::map<int, Plan>& plans, int batch, cudaStream_t stream, const char* what,
              Prepare&& prepare) {
  if (const auto found = plans.find(batch); found != plans.end()) return found->second;
  require_not_capturing(stream, what);
  const auto entry = plans.try_emplace(batch).first;
  try {
    prepare(entry->second);
  } catch (...) {
    plans.erase(entry);
    throw;
  }
  return entry->second;
}

// DLSCALE_CUDNN_GRAPH_VERBOSE=1 (any value but empty or 0): the convolutions' searches print on
// stderr what they timed and chose, the graph path's engines and the legacy path's algorithms
// alike (for profiles: what each layer shape runs on, and what its search cost).
inline bool cudnn_search_verbose() {
  static const bool verbose = [] {
    const char* value = std::getenv("DLSCALE_CUDNN_GRAPH_VERBOSE");
    return value != nullptr && *value != '\0' && std::string(value) != "0";
  }();
  return verbose;
}

// The workspace every convolution of a device shares, on either path (legacy or graph): every
// pass runs on the device's one stream, so one buffer serves them all, each layer's algorithm
// asking for at most CudaContext::convolution_workspace_limit. It grows only on first calls (never
// during a capture), and keeps what it has outgrown: work queued earlier, or a graph captured
// earlier, may still point into it.
// It grows by doubling, to save reallocations, but never past `limit` (what one algorithm may ask
// for) nor, beyond what is asked, past a quarter of the free memory (the searches' own bound: a
// 4096 MiB limit must not double a workspace into memory the network needs on a small GPU): the
// buffer in use stays within the limit.
class ConvolutionWorkspace {
 public:
  explicit ConvolutionWorkspace(std::size_t limit) : limit_(limit) {}

  void* get(std::size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return nullptr;
    if (buffers_.empty() || buffers_.back().size() < bytes) {
      require_not_capturing(stream, "cuDNN convolution workspace");
      std::size_t grown = bytes;
      if (!buffers_.empty()) {
        std::size_t free_bytes = 0, total_bytes = 0;
        DLSCALE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        grown = std::max(bytes, std::min({2 * buffers_.back().size(), limit_, free_bytes / 4}));
      }
      buffers_.emplace_back(grown);
    }
    return buffers_.back().data();
  }
  // The buffer in use, in bytes (0 before any convolution asked for workspace).
  std::size_t size() const { return buffers_.empty() ? 0 : buffers_.back().size(); }

 private:
  std::size_t limit_;
  std::vector<DeviceBuffer> buffers_;  // the last one is in use
};

// A batch of images for cuDNN's descriptor API, packed NCHW or NHWC (the dimensions are given in
// N, C, H, W order either way; the format says how they lie in memory).
inline void describe_images(cudnnTensorDescriptor_t descriptor, int batch, const ImageShape& shape,
                            bool nhwc, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  DLSCALE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(descriptor,
                                                 nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, type,
                                                 batch, shape.channels, shape.height, shape.width));
}

// One float per channel (bias, batch-norm scale, shift and statistics), broadcast over the rest.
inline void describe_channels(cudnnTensorDescriptor_t descriptor, int channels) {
  DLSCALE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(descriptor, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                                 channels, 1, 1));
}

}  // namespace dlscale::kernels
