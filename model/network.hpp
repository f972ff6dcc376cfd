// A feed-forward stack of layers ending in softmax cross-entropy (over every prediction of a
// sample: one for a classifier, one per step for a language model). All parameters sit in one flat
// device buffer and all gradients in another, in layer order, so data-parallel training reduces
// the gradients with one allreduce (or, later, with buckets that are slices of it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kernels/device_array.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

// Where a layer's parameters come from when they do not live whole in the network (fully sharded
// data parallelism gathers each unit of layers just before it runs, forward and backward, and
// binds the layers to the gathered copy: worker/data_parallel_strategy.cpp).
class ParameterGate {
 public:
  virtual ~ParameterGate() = default;
  virtual void before_forward(std::size_t layer) = 0;
  virtual void before_backward(std::size_t layer) = 0;
};

template <typename T>
class Network {
 public:
  // classes: the width of one prediction; 0 means the last layer's whole output.
  Network(kernels::Device& device, std::vector<std::unique_ptr<Layer<T>>> layers, int max_batch,
          int classes = 0)
      : device_(device),
        math_(device.template math<T>()),
        layers_(std::move(layers)),
        max_batch_(max_batch),
        classes_(classes > 0 ? classes : int(layers_.empty() ? 0 : layers_.back()->output_size())) {
    if (layers_.empty()) throw std::invalid_argument("a network needs at least one layer");
    if (layers_.back()->output_size() % classes_ != 0)
      throw std::invalid_argument("the last layer's output is not a whole number of predictions");
    std::size_t parameter_total = 0;
    std::size_t widest = 0;
    for (const auto& layer : layers_) {
      parameter_total += layer->parameter_count();
      widest = std::max({widest, layer->input_size(), layer->output_size()});
    }
    parameter_total_ = parameter_total;
    parameters_ = kernels::DeviceArray<T>(device, parameter_total);
    gradients_ = kernels::DeviceArray<T>(device, parameter_total);
    bind_whole_buffers();
    for (auto& layer : layers_)
      outputs_.emplace_back(device, std::size_t(max_batch) * layer->output_size());
    loss_gradient_ =
        kernels::DeviceArray<T>(device, std::size_t(max_batch) * layers_.back()->output_size());
    loss_ = kernels::DeviceArray<T>(device, 1);
    for (auto& buffer : backward_buffers_)
      buffer = kernels::DeviceArray<T>(device, std::size_t(max_batch) * widest);
  }

  // Device bytes a network of these layers allocates for batches of up to max_batch samples,
  // known before allocating anything: the memory check refuses runs that would not fit.
  static std::size_t device_bytes(const std::vector<LayerShape>& layers, int max_batch) {
    std::size_t parameters = 0, widest = 0, outputs = 0, scratch = 0;
    for (const auto& layer : layers) {
      parameters += layer.parameter_count;
      widest = std::max({widest, layer.input_size, layer.output_size});
      outputs += layer.output_size + layer.internal_values;
      scratch += layer.scratch_values;
    }
    const std::size_t values = 2 * parameters + scratch            // weights, gradients, scratch
                               + std::size_t(max_batch) * outputs  // outputs, inner activations
                               +
                               std::size_t(max_batch) * layers.back().output_size  // loss gradient
                               + 2 * std::size_t(max_batch) * widest;  // backward buffers
    return values * sizeof(T);
  }

  // An upper bound on the bf16 copies that --precision bf16 adds on the device: each layer with
  // parameters may keep, per GEMM or convolution of its step (forward, input gradient, weight
  // gradient), a bf16 copy of both operands: its input twice, its weights twice and its output
  // gradient twice. The copies of one call are staging that the next call reuses, except the
  // input's of a graph-path convolution, kept from forward to backward (one per layer, well
  // inside the bound). Layers computing in float (batch norm) are counted too: a bound.
  static std::size_t bf16_copy_bytes(const std::vector<LayerShape>& layers, int max_batch) {
    constexpr std::size_t bf16_bytes = 2;
    std::size_t values = 0;
    for (const auto& layer : layers)
      if (layer.parameter_count > 0)
        values += 2 * (layer.parameter_count +
                       std::size_t(max_batch) * (layer.input_size + layer.output_size));
    return values * bf16_bytes;
  }

  std::size_t allocated_bytes() const {
    std::size_t values = 2 * parameter_total_ + loss_gradient_.size() +
                         backward_buffers_[0].size() + backward_buffers_[1].size();
    for (const auto& output : outputs_) values += output.size();
    for (const auto& layer : layers_)
      values +=
          std::size_t(max_batch_) * layer->internal_values_per_sample() + layer->scratch_values();
    return values * sizeof(T);
  }

  // Every rank calls this with the same seed and so starts from identical weights.
  void initialize(std::uint64_t seed) {
    std::vector<T> host(parameters_.size());
    std::size_t offset = 0;
    std::uint64_t stream = 0;  // the layer's index, counting each layer of a stack
    for (const auto& layer : layers_) {
      const std::size_t count = layer->parameter_count();
      layer->initialize(std::span<T>(host).subspan(offset, count), seed, stream);
      offset += count;
      stream += layer->random_streams();
    }
    parameters_.copy_from_host(host);
  }

  // Runs every layer and the loss, keeping the loss's gradient for backward(); loss() reads the
  // mean loss over all predictions of the batch. labels: one per prediction.
  void forward_loss(int batch, const T* inputs, const std::int32_t* labels) {
    check_batch(batch);
    const T* x = inputs;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (gate_ != nullptr) gate_->before_forward(i);
      layers_[i]->forward(math_, batch, x, outputs_[i].data());
      x = outputs_[i].data();
    }
    math_.softmax_cross_entropy(batch * predictions_per_sample(), classes_, x, labels,
                                loss_gradient_.data(), loss_.data());
  }

  // The loss of the last forward_loss(), copied to the host (so it waits for the device).
  double loss() const { return double(loss_.to_host()[0]); }

  // Called after each layer's backward with the layer's index, last layer first: from then on
  // that layer's slice of gradients() is final (gradient buckets start their sums on it).
  using LayerDone = std::function<void(std::size_t layer)>;

  // Back-propagates the loss kept by the last forward_loss() into gradients().
  void backward(int batch, const T* inputs, const LayerDone& layer_done = {}) {
    check_batch(batch);
    const T* output_gradient = loss_gradient_.data();
    for (std::size_t i = layers_.size(); i-- > 0;) {
      const T* x = i == 0 ? inputs : outputs_[i - 1].data();
      T* input_gradient = i == 0 ? nullptr : backward_buffers_[i % 2].data();
      if (gate_ != nullptr) gate_->before_backward(i);
      layers_[i]->backward(math_, batch, x, outputs_[i].data(), output_gradient, input_gradient);
      output_gradient = input_gradient;
      if (layer_done) layer_done(i);
    }
  }

  // The last layer's outputs of the last forward_loss(): [batch x predictions x classes] logits.
  const kernels::DeviceArray<T>& logits() const { return outputs_.back(); }

  // Fully sharded training: the layers' parameters and gradients live elsewhere (bind_layer), and
  // `gate` is called before each layer runs; the whole buffers are freed (parameters() and
  // gradients() are empty) until restore_whole_buffers() makes them again. A null gate ends it.
  void set_parameter_gate(ParameterGate* gate) { gate_ = gate; }
  void bind_layer(std::size_t layer, T* parameters, T* gradients) {
    layers_.at(layer)->bind(parameters, gradients);
  }
  void release_whole_buffers() {
    parameters_ = {};
    gradients_ = {};
  }
  // Whole buffers again (uninitialised), every layer bound to its slice of them.
  void restore_whole_buffers() {
    parameters_ = kernels::DeviceArray<T>(device_, parameter_total_);
    gradients_ = kernels::DeviceArray<T>(device_, parameter_total_);
    bind_whole_buffers();
  }
  std::size_t parameter_count() const { return parameter_total_; }

  std::span<T> parameters() { return parameters_.span(); }
  std::span<const T> parameters() const { return parameters_.span(); }
  std::span<T> gradients() { return gradients_.span(); }
  std::span<const T> gradients() const { return gradients_.span(); }
  const std::vector<std::unique_ptr<Layer<T>>>& layers() const { return layers_; }

  std::size_t input_size() const { return layers_.front()->input_size(); }
  int classes() const { return classes_; }
  int predictions_per_sample() const { return int(layers_.back()->output_size()) / classes_; }
  int max_batch() const { return max_batch_; }

 private:
  void bind_whole_buffers() {
    std::size_t offset = 0;
    for (auto& layer : layers_) {
      layer->bind(parameters_.data() + offset, gradients_.data() + offset);
      offset += layer->parameter_count();
    }
  }
  void check_batch(int batch) const {
    if (batch < 1 || batch > max_batch_)
      throw std::invalid_argument("batch outside the range this network was built for");
  }

  kernels::Device& device_;
  kernels::MathOps<T>& math_;
  std::vector<std::unique_ptr<Layer<T>>> layers_;
  int max_batch_;
  int classes_;
  std::size_t parameter_total_ = 0;
  kernels::DeviceArray<T> parameters_;
  kernels::DeviceArray<T> gradients_;
  ParameterGate* gate_ = nullptr;
  std::vector<kernels::DeviceArray<T>> outputs_;  // one per layer: what backward needs from forward
  kernels::DeviceArray<T> loss_gradient_;
  kernels::DeviceArray<T> loss_;
  kernels::DeviceArray<T> backward_buffers_[2];  // input gradients, alternating layer by layer
};

}  // namespace dlscale::model
