// Float element-wise work that needs exp(): the logistic sigmoid, GELU, softmax and log-softmax,
// on oneDNN's JIT kernels. GCC leaves std::exp in a loop scalar (glibc declares its vector exp only
// under -ffast-math), which made the LSTM's 10,000-class softmax 8% of a step.
#pragma once

#include <cstddef>
#include <map>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

namespace dlscale::kernels {

class DnnlElementwise {
 public:
  DnnlElementwise(const dnnl::engine& engine, dnnl::stream& stream);

  // y = 1 / (1 + exp(-x)), count elements; y may be x.
  void logistic(std::size_t count, const float* x, float* y);
  // y = exp(x), count elements; y may be x.
  void exp(std::size_t count, const float* x, float* y);
  // Each row of y = x - max(x) - log(sum(exp(x - max(x)))) over its `columns` elements.
  void log_softmax(int rows, int columns, const float* x, float* y);
  // Each row of y = exp(x - max(x)) / sum(exp(x - max(x))) over its `columns` elements.
  void softmax(int rows, int columns, const float* x, float* y);
  // GELU, tanh form (oneDNN's eltwise_gelu_tanh); y may be x.
  void gelu(std::size_t count, const float* x, float* y);
  // dx = dy * gelu'(x); dx may be dy.
  void gelu_backward(std::size_t count, const float* x, const float* dy, float* dx);

 private:
  void run_eltwise(dnnl::algorithm algorithm, std::size_t count, const float* x, float* y);

  dnnl::engine engine_;
  dnnl::stream& stream_;
  std::map<std::pair<dnnl::algorithm, std::size_t>, dnnl::eltwise_forward> eltwise_;
  std::map<std::pair<int, int>, dnnl::logsoftmax_forward> log_softmax_;
  std::map<std::pair<int, int>, dnnl::softmax_forward> softmax_;
  std::map<std::size_t, dnnl::eltwise_backward> gelu_backward_;
};

}  // namespace dlscale::kernels
