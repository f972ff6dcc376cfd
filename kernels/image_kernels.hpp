// The image-layer part of the Device seam: convolution and pooling, forward and backward, in
// float. A kernel is made once per layer for its geometry, keeps whatever it needs between
// forward and backward (max-pooling indices, primitives), and is then run every step. The CPU
// device implements them with oneDNN; a CUDA device would with cuDNN.
// Convolution weights are OIHW (groups: G x O/G x I/G x H x W), row-major; activations are in the
// ImageLayout each geometry names.
#pragma once

#include <cstddef>

namespace dlscale::kernels {

struct ImageShape {
  int channels = 0, height = 0, width = 0;
  std::size_t size() const { return std::size_t(channels) * height * width; }
};

// How a batch of images lies in memory. nchw is the plain layout: the input data, the tests'
// oracles. native is the layout the device's kernels run fastest on (on the CPU, oneDNN's
// channel-blocked nChw8c or nChw16c); networks keep activations in it from layer to layer, so no
// step pays for reorders between layers. Both hold the same values, so element-wise layers (ReLU,
// residual add) are indifferent. A dense layer after an image reads its features in native
// order: that only permutes its randomly initialised weights.
enum class ImageLayout { nchw, native };

struct ConvolutionGeometry {
  ImageShape input;
  int output_channels = 0;
  int kernel = 1;  // square kernels: every workload in the zoo uses them
  int stride = 1;
  int padding = 0;
  int groups = 1;
  bool bias = true;  // false where batch norm follows and would cancel it
  ImageLayout input_layout = ImageLayout::nchw;
  ImageLayout output_layout = ImageLayout::nchw;
  // y = max(conv(x, W) + b, 0) in the same pass: VGG's and AlexNet's convolution and ReLU, fused
  // as cuDNN and oneDNN offer it (one memory pass fewer forward). Backward, the kernel masks the
  // gradient with respect to y where y is 0 in the pass that first reads it (on the GPU's graph
  // path, the one that rounds it to bf16 and sums the bias gradient), not in a pass of its own.
  bool relu = false;

  ImageShape output() const {
    const auto out = [&](int size) { return (size + 2 * padding - kernel) / stride + 1; };
    return {output_channels, out(input.height), out(input.width)};
  }
  std::size_t weight_count() const {
    return std::size_t(output_channels) * (input.channels / groups) * kernel * kernel;
  }
  std::size_t parameter_count() const { return weight_count() + (bias ? output_channels : 0); }
  // Multiply-adds x 2 per sample, forward: 2 * Hout * Wout * Cout * Cin/groups * K * K.
  double forward_flops_per_sample() const {
    const ImageShape out = output();
    return 2.0 * out.height * out.width * weight_count();
  }
};

enum class PoolingKind { max, average };

struct PoolingGeometry {
  ImageShape input;
  PoolingKind kind = PoolingKind::max;
  int kernel = 2;
  int stride = 2;
  int padding = 0;
  ImageLayout input_layout = ImageLayout::nchw;
  ImageLayout output_layout = ImageLayout::nchw;

  ImageShape output() const {
    const auto out = [&](int size) { return (size + 2 * padding - kernel) / stride + 1; };
    return {input.channels, out(input.height), out(input.width)};
  }
};

// Batch normalization in training mode (Ioffe & Szegedy 2015): each channel is normalised with the
// mean and variance of this batch over (batch, height, width), then y = scale * x_hat + shift,
// and with `relu` y = max(y, 0) in the same pass (the conv-BN-ReLU of ResNets: one memory pass
// instead of two, forward and backward). epsilon = 1e-5 as in PyTorch. Running averages for
// inference are not kept: dlscale only trains.
struct BatchNormGeometry {
  ImageShape shape;
  ImageLayout layout = ImageLayout::nchw;
  bool relu = false;
};

class BatchNormKernel {
 public:
  static constexpr float epsilon = 1e-5f;
  virtual ~BatchNormKernel() = default;
  virtual void forward(int batch, const float* x, const float* scale, const float* shift,
                       float* y) = 0;
  // Uses the statistics of the last forward(); input_gradient may be null.
  virtual void backward(int batch, const float* x, const float* scale, const float* shift,
                        const float* output_gradient, float* input_gradient, float* scale_gradient,
                        float* shift_gradient) = 0;
};

class ConvolutionKernel {
 public:
  virtual ~ConvolutionKernel() = default;
  // bias and bias_gradient are ignored (may be null) when the geometry has no bias. With the
  // geometry's relu, y is max(conv + bias, 0).
  virtual void forward(int batch, const float* x, const float* weights, const float* bias,
                       float* y) = 0;
  // Writes weight and bias gradients, and the input gradient unless input_gradient is null, from
  // the gradient with respect to the output y. With the geometry's relu, y is that forward's
  // output and the kernel masks the gradient where y is 0; without it, y is ignored (may be null).
  // Each backward() follows the forward() of the same x and weights, and may reuse what it
  // converted.
  virtual void backward(int batch, const float* x, const float* weights, const float* y,
                        const float* output_gradient, float* input_gradient, float* weight_gradient,
                        float* bias_gradient) = 0;
};

class PoolingKernel {
 public:
  virtual ~PoolingKernel() = default;
  virtual void forward(int batch, const float* x, float* y) = 0;
  // Uses what the last forward() kept (max positions).
  virtual void backward(int batch, const float* output_gradient, float* input_gradient) = 0;
};

}  // namespace dlscale::kernels
