// Plain-loop reference convolution and pooling in double precision: test oracles only. They are
// checked against finite differences, and the device's kernels (oneDNN) are checked against them.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/image_kernels.hpp"

namespace dlscale::reference {

using kernels::ConvolutionGeometry;
using kernels::PoolingGeometry;

// Visits every (sample, output channel, output row, output column, input channel, kernel row,
// kernel column) whose input position lies inside the image, with the flat indices involved.
template <typename Visit>
void for_each_convolution_term(const ConvolutionGeometry& g, int batch, Visit visit) {
  const auto out = g.output();
  const int in_per_group = g.input.channels / g.groups;
  const int out_per_group = g.output_channels / g.groups;
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < g.output_channels; ++o)
      for (int i = 0; i < out.height; ++i)
        for (int j = 0; j < out.width; ++j)
          for (int c = 0; c < in_per_group; ++c)
            for (int ki = 0; ki < g.kernel; ++ki)
              for (int kj = 0; kj < g.kernel; ++kj) {
                const int row = i * g.stride - g.padding + ki, col = j * g.stride - g.padding + kj;
                if (row < 0 || row >= g.input.height || col < 0 || col >= g.input.width) continue;
                const int channel = (o / out_per_group) * in_per_group + c;
                const std::size_t x_index =
                    ((std::size_t(n) * g.input.channels + channel) * g.input.height + row) *
                        g.input.width +
                    col;
                const std::size_t w_index =
                    ((std::size_t(o) * in_per_group + c) * g.kernel + ki) * g.kernel + kj;
                const std::size_t y_index =
                    ((std::size_t(n) * g.output_channels + o) * out.height + i) * out.width + j;
                visit(x_index, w_index, y_index);
              }
}

inline std::vector<double> convolution_forward(const ConvolutionGeometry& g, int batch,
                                               const std::vector<double>& x,
                                               const std::vector<double>& weights,
                                               const std::vector<double>& bias) {
  const auto out = g.output();
  std::vector<double> y(std::size_t(batch) * out.size());
  if (g.bias)
    for (std::size_t index = 0; index < y.size(); ++index)
      y[index] = bias[(index / (std::size_t(out.height) * out.width)) % g.output_channels];
  for_each_convolution_term(g, batch, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
    y[yi] += weights[wi] * x[xi];
  });
  if (g.relu)
    for (double& value : y) value = std::max(value, 0.0);
  return y;
}

struct ConvolutionGradients {
  std::vector<double> input, weights, bias;
};

// The gradient with respect to a fused ReLU's input: dy where its output y is positive, else 0.
// A kernel masks by the y it wrote, so its tests mask the reference's dy with that same y (a y
// computed again here could fall on the other side of 0 where the kernel rounded to bf16).
inline std::vector<double> relu_masked(std::vector<double> dy, const std::vector<double>& y) {
  for (std::size_t i = 0; i < dy.size(); ++i)
    if (!(y.at(i) > 0)) dy[i] = 0;
  return dy;
}

// dy is the gradient with respect to conv + bias, before any ReLU: the geometry's relu is the
// caller's to mask (relu_masked).
inline ConvolutionGradients convolution_backward(const ConvolutionGeometry& g, int batch,
                                                 const std::vector<double>& x,
                                                 const std::vector<double>& weights,
                                                 const std::vector<double>& dy) {
  const auto out = g.output();
  ConvolutionGradients grads{std::vector<double>(x.size()), std::vector<double>(weights.size()),
                             std::vector<double>(g.bias ? g.output_channels : 0)};
  if (g.bias)
    for (std::size_t index = 0; index < dy.size(); ++index)
      grads.bias[(index / (std::size_t(out.height) * out.width)) % g.output_channels] += dy[index];
  for_each_convolution_term(g, batch, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
    grads.input[xi] += weights[wi] * dy[yi];
    grads.weights[wi] += x[xi] * dy[yi];
  });
  return grads;
}

// Calls visit(output index, input indices of its window inside the image, window area).
template <typename Visit>
void for_each_pooling_window(const PoolingGeometry& g, int batch, Visit visit) {
  const auto out = g.output();
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < g.input.channels; ++c)
      for (int i = 0; i < out.height; ++i)
        for (int j = 0; j < out.width; ++j) {
          std::vector<std::size_t> window;
          for (int ki = 0; ki < g.kernel; ++ki)
            for (int kj = 0; kj < g.kernel; ++kj) {
              const int row = i * g.stride - g.padding + ki, col = j * g.stride - g.padding + kj;
              if (row < 0 || row >= g.input.height || col < 0 || col >= g.input.width) continue;
              window.push_back(((std::size_t(n) * g.input.channels + c) * g.input.height + row) *
                                   g.input.width +
                               col);
            }
          visit(((std::size_t(n) * g.input.channels + c) * out.height + i) * out.width + j, window);
        }
}

// Max pooling picks the first largest value; average pooling divides by the whole window,
// padding included (PyTorch's default).
inline std::vector<double> pooling_forward(const PoolingGeometry& g, int batch,
                                           const std::vector<double>& x) {
  std::vector<double> y(std::size_t(batch) * g.output().size());
  for_each_pooling_window(g, batch, [&](std::size_t yi, const std::vector<std::size_t>& window) {
    if (g.kind == kernels::PoolingKind::max) {
      double best = -std::numeric_limits<double>::infinity();
      for (std::size_t xi : window) best = std::max(best, x[xi]);
      y[yi] = best;
    } else {
      double sum = 0;
      for (std::size_t xi : window) sum += x[xi];
      y[yi] = sum / (g.kernel * g.kernel);
    }
  });
  return y;
}

inline std::vector<double> pooling_backward(const PoolingGeometry& g, int batch,
                                            const std::vector<double>& x,
                                            const std::vector<double>& dy) {
  std::vector<double> dx(x.size());
  for_each_pooling_window(g, batch, [&](std::size_t yi, const std::vector<std::size_t>& window) {
    if (g.kind == kernels::PoolingKind::max) {
      std::size_t best = window.front();
      for (std::size_t xi : window)
        if (x[xi] > x[best]) best = xi;
      dx[best] += dy[yi];
    } else {
      for (std::size_t xi : window) dx[xi] += dy[yi] / (g.kernel * g.kernel);
    }
  });
  return dx;
}

// Batch norm in training mode over (batch, height, width) of each channel, biased variance.
struct BatchNormResult {
  std::vector<double> output, input_gradient, scale_gradient, shift_gradient;
};

inline BatchNormResult batch_norm(const kernels::ImageShape& shape, int batch,
                                  const std::vector<double>& x, const std::vector<double>& scale,
                                  const std::vector<double>& shift, const std::vector<double>& dy) {
  const double epsilon = kernels::BatchNormKernel::epsilon;
  const std::size_t plane = std::size_t(shape.height) * shape.width;
  const double count = double(batch) * double(plane);
  BatchNormResult r{std::vector<double>(x.size()), std::vector<double>(x.size()),
                    std::vector<double>(shape.channels), std::vector<double>(shape.channels)};
  for (int c = 0; c < shape.channels; ++c) {
    const auto index = [&](int n, std::size_t p) {
      return (std::size_t(n) * shape.channels + c) * plane + p;
    };
    double mean = 0, variance = 0;
    for (int n = 0; n < batch; ++n)
      for (std::size_t p = 0; p < plane; ++p) mean += x[index(n, p)] / count;
    for (int n = 0; n < batch; ++n)
      for (std::size_t p = 0; p < plane; ++p)
        variance += (x[index(n, p)] - mean) * (x[index(n, p)] - mean) / count;
    const double inverse_std = 1 / std::sqrt(variance + epsilon);
    double dy_mean = 0, dy_xhat_mean = 0;
    for (int n = 0; n < batch; ++n)
      for (std::size_t p = 0; p < plane; ++p) {
        const double xhat = (x[index(n, p)] - mean) * inverse_std;
        r.output[index(n, p)] = scale[c] * xhat + shift[c];
        r.shift_gradient[c] += dy[index(n, p)];
        r.scale_gradient[c] += dy[index(n, p)] * xhat;
        dy_mean += dy[index(n, p)] / count;
        dy_xhat_mean += dy[index(n, p)] * xhat / count;
      }
    for (int n = 0; n < batch; ++n)
      for (std::size_t p = 0; p < plane; ++p) {
        const double xhat = (x[index(n, p)] - mean) * inverse_std;
        r.input_gradient[index(n, p)] =
            scale[c] * inverse_std * (dy[index(n, p)] - dy_mean - xhat * dy_xhat_mean);
      }
  }
  return r;
}

}  // namespace dlscale::reference
