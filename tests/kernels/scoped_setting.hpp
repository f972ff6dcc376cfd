// An environment variable set (or unset) for one scope and restored after it: how tests choose
// the settings that a device reads when it is made (DLSCALE_CUDNN_API and the like).
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlscale::testing {

class ScopedSetting {
 public:
  // A null value unsets the variable for the scope.
  ScopedSetting(const char* name, const char* value) : name_(name) {
    if (const char* saved = std::getenv(name)) saved_ = saved;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedSetting() {
    if (saved_)
      setenv(name_.c_str(), saved_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

// Every GPU setting that a device's changed_settings reports (kernels/cuda/cuda_device.cpp)
// unset for one scope: for tests that expect the defaults whatever their environment exports.
// Settings a test then sets for itself go in scopes inside this one.
class DefaultGpuSettings {
 public:
  DefaultGpuSettings() {
    for (const char* name :
         {"DLSCALE_CUDA_IMAGE_ACTIVATIONS", "DLSCALE_CUDNN_ATTENTION",
          "DLSCALE_CUDA_LAYER_NORM_GRADIENT", "DLSCALE_CUDA_PADDED_BF16_ROWS",
          "DLSCALE_CUDA_BATCHED_LOADS", "DLSCALE_CUDA_GEMM_BIAS_EPILOGUE",
          "DLSCALE_CUDNN_LSTM_STACK", "DLSCALE_CUDNN_WORKSPACE_MIB", "DLSCALE_CUDNN_BUILD_THREADS",
          "DLSCALE_CUDNN_KERNEL_CACHE", "DLSCALE_CUDNN_PRUNED_SEARCH", "DLSCALE_CUDA_FAST_DIVMOD",
          "DLSCALE_CUDA_NCHW_BIAS_RELU", "DLSCALE_CUDA_NCHW_POOLING",
          "DLSCALE_CUDA_NCHW_BATCH_NORM"})
      settings_.push_back(std::make_unique<ScopedSetting>(name, nullptr));
  }

 private:
  std::vector<std::unique_ptr<ScopedSetting>> settings_;
};

}  // namespace dlscale::testing
