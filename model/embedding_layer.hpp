// Token embedding: each of a sample's `steps` token ids (stored as values) selects a row of a
// [vocabulary x width] table; with learned positions, row t of a [steps x width] position table is
// added at step t (GPT-2's wte and wpe). Ids are data, not parameters, so there is no input
// gradient.
#pragma once

#include "core/parallel_fill.hpp"
#include "core/random.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

struct EmbeddingOptions {
  bool learned_positions = false;
  // Entries start N(0, deviation^2): 1 as PyTorch's nn.Embedding, 0.02 as GPT-2's tables.
  double initial_deviation = 1.0;
};

template <typename T>
class EmbeddingLayer final : public Layer<T> {
 public:
  EmbeddingLayer(int vocabulary, int width, int steps, EmbeddingOptions options = {})
      : vocabulary_(vocabulary), width_(width), steps_(steps), options_(options) {}

  std::string kind() const override { return "embedding"; }
  std::size_t input_size() const override { return steps_; }
  std::size_t output_size() const override { return std::size_t(steps_) * width_; }
  std::size_t parameter_count() const override {
    return table_values() + (options_.learned_positions ? output_size() : 0);
  }

  // The token table, then the position table.
  void bind(T* parameters, T* gradients) override {
    table_ = parameters;
    table_gradient_ = gradients;
    positions_ = parameters + table_values();
    position_gradient_ = gradients + table_values();
  }
  void initialize(std::span<T> host_parameters, std::uint64_t seed,
                  std::uint64_t layer_index) const override {
    const CounterRandom random(seed, layer_index);
    fill_in_parallel(host_parameters, [&](std::size_t i) {
      return T(options_.initial_deviation * random.normal(i));
    });
  }

  // An output head that reuses the token table (TiedOutputHead) reads it and writes its part of
  // the table's gradient through these, at each call: bind() may move them (fully sharded
  // training binds each unit to a gathered copy).
  const T* table() const { return table_; }
  T* table_gradient() const { return table_gradient_; }
  // From now on backward() adds the lookups' gradient to the table's instead of overwriting it:
  // the tied head, the network's last layer, has already written its part there in this step.
  void tie_to_output_head() { tied_to_output_head_ = true; }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    math.embedding_forward(batch * steps_, width_, x, table_, y);
    // Every sample's [steps x width] block, as one row, gets the position table added.
    if (options_.learned_positions) math.add_row_bias(batch, int(output_size()), positions_, y);
  }
  void backward(kernels::MathOps<T>& math, int batch, const T* x, const T* /*y*/,
                const T* output_gradient, T* /*input_gradient*/) override {
    math.embedding_backward(batch * steps_, width_, vocabulary_, x, output_gradient,
                            table_gradient_, tied_to_output_head_);
    if (options_.learned_positions)
      math.column_sums(batch, int(output_size()), output_gradient, position_gradient_);
  }

 private:
  std::size_t table_values() const { return std::size_t(vocabulary_) * width_; }

  int vocabulary_;
  int width_;
  int steps_;
  EmbeddingOptions options_;
  bool tied_to_output_head_ = false;
  T* table_ = nullptr;
  T* table_gradient_ = nullptr;
  T* positions_ = nullptr;
  T* position_gradient_ = nullptr;
};

}  // namespace dlscale::model
