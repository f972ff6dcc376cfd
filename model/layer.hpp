// The Layer seam: one forward and one backward, with explicit shapes, calling the device's math.
// Parameters and their gradients live in the Network's flat buffers (one allreduce covers them
// all); a layer is told where its slice is by bind().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "kernels/device.hpp"

namespace dlscale::model {

// What memory planning needs to know of a layer, without building it.
struct LayerShape {
  std::size_t input_size = 0;   // values per sample
  std::size_t output_size = 0;  // values per sample
  std::size_t parameter_count = 0;
  std::size_t internal_values = 0;  // per sample, allocated by the layer itself
  std::size_t scratch_values = 0;   // allocated by the layer once, whatever the batch
};

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;

  virtual std::string kind() const = 0;
  virtual std::size_t input_size() const = 0;   // values per sample
  virtual std::size_t output_size() const = 0;  // values per sample
  virtual std::size_t parameter_count() const { return 0; }
  // Values per sample of device memory the layer allocates for itself (a composite layer's
  // inner activations); counted by the memory plan.
  virtual std::size_t internal_values_per_sample() const { return 0; }
  // Values of device memory the layer allocates for itself once, whatever the batch (attention's
  // scores of one head); counted by the memory plan.
  virtual std::size_t scratch_values() const { return 0; }
  LayerShape shape() const {
    return {input_size(), output_size(), parameter_count(), internal_values_per_sample(),
            scratch_values()};
  }
  // Multiply-adds counted as 2 FLOPs, per sample, forward only.
  virtual double forward_flops_per_sample() const { return 0; }

  // Where this layer's parameters and gradients live (device memory, parameter_count() each).
  virtual void bind(T* /*parameters*/, T* /*gradients*/) {}
  // Fills this layer's slice of the initial parameters, on the host, from the seed's random
  // streams layer_index .. layer_index + random_streams() - 1.
  virtual void initialize(std::span<T> /*host_parameters*/, std::uint64_t /*seed*/,
                          std::uint64_t /*layer_index*/) const {}
  // One stream a layer; a stack of layers in one (an LSTM stack) one for each of them, so that it
  // starts from the parameters its layers would start from apart, and so do the layers after it.
  virtual std::uint64_t random_streams() const { return 1; }

  virtual void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) = 0;
  // Writes the parameter gradients (overwriting, not accumulating) and, unless input_gradient is
  // null (the first layer needs none), the gradient with respect to x.
  virtual void backward(kernels::MathOps<T>& math, int batch, const T* x, const T* y,
                        const T* output_gradient, T* input_gradient) = 0;
};

}  // namespace dlscale::model
