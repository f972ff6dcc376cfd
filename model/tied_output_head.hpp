// The output head of a language model whose weights are its token embedding table (Press and Wolf
// 2017; GPT-2): logits = x table^T at every step. The head owns no parameters: it reads the table
// of the EmbeddingLayer it was built with, and writes its part of the table's gradient there.
//   forward:  y[B x vocabulary] = x[B x width] * table^T       (B: samples * steps rows)
//   backward: dtable = dy^T[vocabulary x B] * x[B x width]  (overwriting: see below)
//             dx[B x width] = dy[B x vocabulary] * table
// Why the gradient stays right: the head is the network's last layer, so its backward runs first
// in a step and overwrites the table's gradient; the embedding, layer 0, runs last and adds its
// lookups' part (EmbeddingLayer::tie_to_output_head). Gradient buckets start on a slice only when
// its lowest layer's backward is done, and the table's slice belongs to layer 0, so it is summed
// across ranks only once both parts are in. Fully sharded training (--sharding full) is refused
// for tied networks: it releases layer 0's gathered table long before the head runs.
#pragma once

#include "model/embedding_layer.hpp"

namespace dlscale::model {

template <typename T>
class TiedOutputHead final : public Layer<T> {
 public:
  // `embedding` must outlive the head (both belong to one Network) and is tied by this call.
  TiedOutputHead(EmbeddingLayer<T>& embedding, int width, int vocabulary, int steps)
      : embedding_(embedding), width_(width), vocabulary_(vocabulary), steps_(steps) {
    embedding_.tie_to_output_head();
  }

  std::string kind() const override { return "tied output head"; }
  std::size_t input_size() const override { return std::size_t(steps_) * width_; }
  std::size_t output_size() const override { return std::size_t(steps_) * vocabulary_; }
  double forward_flops_per_sample() const override {
    return 2.0 * steps_ * double(width_) * vocabulary_;
  }

  void forward(kernels::MathOps<T>& math, int samples, const T* x, T* y) override {
    const int rows = samples * steps_;
    math.gemm(kernels::Transpose::no, kernels::Transpose::yes, rows, vocabulary_, width_, T(1), x,
              width_, embedding_.table(), width_, T(0), y, vocabulary_);
  }

  void backward(kernels::MathOps<T>& math, int samples, const T* x, const T* /*y*/,
                const T* output_gradient, T* input_gradient) override {
    math.linear_backward(samples * steps_, width_, vocabulary_, x, embedding_.table(),
                         output_gradient, embedding_.table_gradient(), nullptr, input_gradient);
  }

 private:
  EmbeddingLayer<T>& embedding_;
  int width_;
  int vocabulary_;
  int steps_;
};

}  // namespace dlscale::model
