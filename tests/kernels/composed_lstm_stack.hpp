// An LSTM stack run as its layers one after another, each on a device's one-layer kernel, with the
// sequences between them in that device's memory: the reference a stacked kernel (cuDNN's
// multi-layer RNN) is held to, and, on the CPU, a device that runs stacks, for the tests of the
// network around one (CpuDeviceRunningLstmStacks).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/device_array.hpp"
#include "kernels/sequence_kernels.hpp"
#include "tests/kernels/cpu_device_with_image_kernels.hpp"

namespace dlscale::testing {

class ComposedLstmStack final : public kernels::LstmKernel {
 public:
  ComposedLstmStack(kernels::Device& device, const kernels::LstmGeometry& geometry)
      : device_(device), geometry_(geometry) {
    for (int layer = 0; layer < geometry.layers; ++layer)
      layers_.push_back(device.make_lstm(geometry.layer(layer)));
  }

  void forward(int batch, const float* x, const float* parameters, float* y) override {
    make_sequences(batch);
    const float* input = x;
    for (int layer = 0; layer < geometry_.layers; ++layer) {
      float* output = layer + 1 == geometry_.layers ? y : outputs_[std::size_t(layer)].data();
      layers_[std::size_t(layer)]->forward(batch, input, parameters + offset(layer), output);
      input = output;
    }
  }

  // Top layer first, as the network runs its layers: each layer's input gradient is the output
  // gradient of the one below.
  void backward(int batch, const float* x, const float* parameters, const float* y,
                const float* output_gradient, float* input_gradient,
                float* parameter_gradient) override {
    const float* gradient_above = output_gradient;
    for (int layer = geometry_.layers - 1; layer >= 0; --layer) {
      const auto l = std::size_t(layer);
      const float* input = layer == 0 ? x : outputs_[l - 1].data();
      const float* output = layer + 1 == geometry_.layers ? y : outputs_[l].data();
      float* below = layer == 0 ? input_gradient : gradients_[l - 1].data();
      layers_[l]->backward(batch, input, parameters + offset(layer), output, gradient_above, below,
                           parameter_gradient + offset(layer));
      gradient_above = below;
    }
  }

 private:
  std::size_t offset(int layer) const {
    std::size_t count = 0;
    for (int below = 0; below < layer; ++below)
      count += geometry_.layer(below).layer_parameter_count();
    return count;
  }
  void make_sequences(int batch) {
    const std::size_t count = std::size_t(batch) * geometry_.steps * geometry_.hidden;
    if (batch == batch_) return;
    outputs_.clear();
    gradients_.clear();
    for (int layer = 0; layer + 1 < geometry_.layers; ++layer) {
      outputs_.emplace_back(device_, count);
      gradients_.emplace_back(device_, count);
    }
    batch_ = batch;
  }

  kernels::Device& device_;
  kernels::LstmGeometry geometry_;
  std::vector<std::unique_ptr<kernels::LstmKernel>> layers_;
  // Between layer l and l + 1: its output, and the gradient with respect to it.
  std::vector<kernels::DeviceArray<float>> outputs_, gradients_;
  int batch_ = 0;
};

// The CPU device, running an LSTM stack as one layer (ComposedLstmStack on its oneDNN layers), as
// a GPU does with DLSCALE_CUDNN_LSTM_STACK=yes.
class CpuDeviceRunningLstmStacks final : public CpuDeviceWithImageKernels {
 public:
  bool runs_lstm_stacks() const override { return true; }
  std::unique_ptr<kernels::LstmKernel> make_lstm(const kernels::LstmGeometry& geometry) override {
    if (geometry.layers == 1) return cpu_.make_lstm(geometry);
    return std::make_unique<ComposedLstmStack>(cpu_, geometry);
  }
};

}  // namespace dlscale::testing
