// A residual block (He et al. 2016; the inverted residual of MobileNet v2 has the same shape):
//   y = activation(branch(x) + shortcut(x)),  shortcut = identity when it has no layers.
// Backward sends the gradient through both paths and adds their input gradients. The block owns
// its inner activations, so the Network around it stays a simple sequence of layers.
#pragma once

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/device_array.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

template <typename T>
class ResidualBlock final : public Layer<T> {
 public:
  using Layers = std::vector<std::unique_ptr<Layer<T>>>;

  // Values per sample a block of these sub-layers allocates for itself, known before building.
  static std::size_t internal_values(const std::vector<LayerShape>& branch,
                                     const std::vector<LayerShape>& shortcut) {
    std::size_t outputs = 0, widest_input = 0;
    for (const auto* path : {&branch, &shortcut})
      for (const auto& layer : *path) {
        outputs += layer.output_size + layer.internal_values;
        widest_input = std::max(widest_input, layer.input_size);
      }
    const std::size_t block_output = branch.back().output_size;
    const std::size_t shortcut_input_gradient = shortcut.empty() ? 0 : branch.front().input_size;
    return outputs + 2 * widest_input + block_output + shortcut_input_gradient;
  }

  // Whether the block's input and its output are images in ImageLayout::native, which the
  // device may hold in another element type: then the sums and the ReLU on them are the math's
  // native_image_ ops.
  struct NativeImages {
    bool input = false, output = false;
  };

  ResidualBlock(kernels::Device& device, Layers branch, Layers shortcut, bool relu_after,
                int max_batch, NativeImages native_images = {})
      : math_(device.template math<T>()),
        branch_(std::move(branch)),
        shortcut_(std::move(shortcut)),
        relu_after_(relu_after),
        native_images_(native_images) {
    std::size_t widest_input = 0;
    for (auto* path : {&branch_, &shortcut_})
      for (auto& layer : *path) {
        outputs_.emplace_back(device, std::size_t(max_batch) * layer->output_size());
        widest_input = std::max(widest_input, layer->input_size());
      }
    for (auto& buffer : gradient_buffers_)
      buffer = kernels::DeviceArray<T>(device, std::size_t(max_batch) * widest_input);
    sum_gradient_ = kernels::DeviceArray<T>(device, std::size_t(max_batch) * output_size());
    if (!shortcut_.empty())
      shortcut_input_gradient_ =
          kernels::DeviceArray<T>(device, std::size_t(max_batch) * input_size());
  }

  std::string kind() const override { return "residual"; }
  std::size_t input_size() const override { return branch_.front()->input_size(); }
  std::size_t output_size() const override { return branch_.back()->output_size(); }
  std::size_t parameter_count() const override {
    std::size_t count = 0;
    for (const auto* path : {&branch_, &shortcut_})
      for (const auto& layer : *path) count += layer->parameter_count();
    return count;
  }
  double forward_flops_per_sample() const override {
    double flops = 0;
    for (const auto* path : {&branch_, &shortcut_})
      for (const auto& layer : *path) flops += layer->forward_flops_per_sample();
    return flops;
  }
  std::size_t internal_values_per_sample() const override {
    return internal_values(shapes(branch_), shapes(shortcut_));
  }
  std::size_t scratch_values() const override {
    std::size_t values = 0;
    for (const auto* path : {&branch_, &shortcut_})
      for (const auto& layer : *path) values += layer->scratch_values();
    return values;
  }

  void bind(T* parameters, T* gradients) override {
    for (auto* path : {&branch_, &shortcut_})
      for (auto& layer : *path) {
        layer->bind(parameters, gradients);
        parameters += layer->parameter_count();
        gradients += layer->parameter_count();
      }
  }

  void initialize(std::span<T> host_parameters, std::uint64_t seed,
                  std::uint64_t layer_index) const override {
    std::size_t offset = 0;
    std::uint64_t inner_index = 0;
    for (const auto* path : {&branch_, &shortcut_})
      for (const auto& layer : *path) {
        layer->initialize(host_parameters.subspan(offset, layer->parameter_count()), seed,
                          (layer_index << 16) + ++inner_index);
        offset += layer->parameter_count();
      }
  }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    const T* branch_result = run_forward(branch_, 0, batch, x);
    const T* shortcut_result =
        shortcut_.empty() ? x : run_forward(shortcut_, branch_.size(), batch, x);
    const std::size_t count = std::size_t(batch) * output_size();
    if (native_images_.output) {
      math.native_image_add(count, branch_result, shortcut_result, y);
      if (relu_after_) math.native_image_relu_forward(count, infinity, y, y);
    } else {
      math.add(count, branch_result, shortcut_result, y);
      if (relu_after_) math.relu_forward(count, infinity, y, y);
    }
  }

  void backward(kernels::MathOps<T>& math, int batch, const T* x, const T* y,
                const T* output_gradient, T* input_gradient) override {
    const T* gradient = output_gradient;
    if (relu_after_) {
      const std::size_t count = std::size_t(batch) * output_size();
      if (native_images_.output)
        math.native_image_relu_backward(count, infinity, y, output_gradient, sum_gradient_.data());
      else
        math.relu_backward(count, infinity, y, output_gradient, sum_gradient_.data());
      gradient = sum_gradient_.data();
    }
    run_backward(branch_, 0, batch, x, gradient, input_gradient);
    if (input_gradient == nullptr) {
      if (!shortcut_.empty()) run_backward(shortcut_, branch_.size(), batch, x, gradient, nullptr);
      return;
    }
    const std::size_t count = std::size_t(batch) * input_size();
    const T* shortcut_gradient = gradient;  // the identity's
    if (!shortcut_.empty()) {
      run_backward(shortcut_, branch_.size(), batch, x, gradient, shortcut_input_gradient_.data());
      shortcut_gradient = shortcut_input_gradient_.data();
    }
    if (native_images_.input)
      math.native_image_add(count, input_gradient, shortcut_gradient, input_gradient);
    else
      math.add(count, input_gradient, shortcut_gradient, input_gradient);
  }

 private:
  static constexpr T infinity = std::numeric_limits<T>::infinity();

  static std::vector<LayerShape> shapes(const Layers& layers) {
    std::vector<LayerShape> result;
    for (const auto& layer : layers) result.push_back(layer->shape());
    return result;
  }

  // Runs a path; its layers' outputs start at outputs_[first_output]. Returns the path's output.
  const T* run_forward(Layers& path, std::size_t first_output, int batch, const T* x) {
    const T* input = x;
    for (std::size_t i = 0; i < path.size(); ++i) {
      path[i]->forward(math_, batch, input, outputs_[first_output + i].data());
      input = outputs_[first_output + i].data();
    }
    return input;
  }

  void run_backward(Layers& path, std::size_t first_output, int batch, const T* x,
                    const T* output_gradient, T* input_gradient) {
    const T* gradient = output_gradient;
    for (std::size_t i = path.size(); i-- > 0;) {
      const T* input = i == 0 ? x : outputs_[first_output + i - 1].data();
      T* next = i == 0 ? input_gradient : gradient_buffers_[i % 2].data();
      path[i]->backward(math_, batch, input, outputs_[first_output + i].data(), gradient, next);
      gradient = next;
    }
  }

  kernels::MathOps<T>& math_;
  Layers branch_;
  Layers shortcut_;
  bool relu_after_;
  NativeImages native_images_;
  std::vector<kernels::DeviceArray<T>> outputs_;  // branch layers', then shortcut layers'
  kernels::DeviceArray<T> gradient_buffers_[2];
  kernels::DeviceArray<T> sum_gradient_;
  kernels::DeviceArray<T> shortcut_input_gradient_;
};

}  // namespace dlscale::model
