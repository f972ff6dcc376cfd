// Token embedding: each of a sample's `steps` token ids (stored as values) selects a row of a
// [vocabulary x width] table. Ids are data, not parameters, so there is no input gradient.
#pragma once

#include "core/random.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

template <typename T>
class EmbeddingLayer final : public Layer<T> {
 public:
  EmbeddingLayer(int vocabulary, int width, int steps)
      : vocabulary_(vocabulary), width_(width), steps_(steps) {}

  std::string kind() const override { return "embedding"; }
  std::size_t input_size() const override { return steps_; }
  std::size_t output_size() const override { return std::size_t(steps_) * width_; }
  std::size_t parameter_count() const override { return std::size_t(vocabulary_) * width_; }

  void bind(T* parameters, T* gradients) override {
    table_ = parameters;
    table_gradient_ = gradients;
  }
  // N(0, 1) entries, as PyTorch's nn.Embedding starts.
  void initialize(std::span<T> host_parameters, std::uint64_t seed,
                  std::uint64_t layer_index) const override {
    const CounterRandom random(seed, layer_index);
    for (std::size_t i = 0; i < host_parameters.size(); ++i)
      host_parameters[i] = T(random.normal(i));
  }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    math.embedding_forward(batch * steps_, width_, x, table_, y);
  }
  void backward(kernels::MathOps<T>& math, int batch, const T* x, const T* /*y*/,
                const T* output_gradient, T* /*input_gradient*/) override {
    math.embedding_backward(batch * steps_, width_, vocabulary_, x, output_gradient,
                            table_gradient_);
  }

 private:
  int vocabulary_;
  int width_;
  int steps_;
  T* table_ = nullptr;
  T* table_gradient_ = nullptr;
};

}  // namespace dlscale::model
