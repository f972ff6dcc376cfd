// Causal multi-head self-attention (Vaswani et al. 2017; GPT-2), without its projections: the
// dense layers before and after it make the queries, keys and values and mix the heads. For each
// sample and head h (d = width / heads values, columns [h d, (h + 1) d) of Q, K, V and O):
//   forward:  S = Q K^T / sqrt(d);  P = causal_softmax(S);  O = P V
//   backward: dV = P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(P * dP));
//             dQ = dS K / sqrt(d);  dK = dS^T Q / sqrt(d)
// Input per sample: [steps x 3 width], each step's Q, K and V side by side (one dense layer makes
// all three); output: [steps x width]. The heads go through in passes of up to
// attention_heads_per_pass, each GEMM of a pass one strided-batched call (a head's Q, K and V
// are head_width columns after the previous head's), so the library spreads one call over its
// threads or SMs; within a pass, blocks of query rows skip the keys after their last row. Only
// one pass's [steps x steps] scores live in the layer's scratch, and backward recomputes P rather
// than keeping every head's from forward (as FlashAttention does), so memory grows with steps^2
// a few times, not with batch x heads x steps^2.
// FLOPs counted: 4 steps^2 width per sample forward (two GEMMs a head, causal half not
// subtracted: PaLM's convention, which MFU uses); the blocks execute fewer.
// Where the device has a fused attention for float layers (Device::make_attention: cuDNN's
// scaled-dot-product attention under DLSCALE_CUDNN_ATTENTION=sdpa and --precision bf16), the
// whole batch goes through it in one call a pass instead, and the passes above are not run.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>

#include "kernels/device_array.hpp"
#include "model/layer.hpp"

namespace dlscale::model {

// Heads per pass: four 256 x 256 score matrices already keep 16 cores busy, and four of a GPU's
// 1024 x 1024 fill its SMs with tiles; more would only grow the scratch.
inline constexpr int attention_heads_per_pass = 4;
// Query rows per causal block on the CPU: 128-row GEMMs still run near the library's peak, and a
// sequence of 256 skips a quarter of the attention GEMMs' work, one of 1,024 seven sixteenths.
// A GPU takes the whole sequence as one block (more, smaller launches have not been measured
// there; cuDNN's fused attention is where its skipping belongs).
inline constexpr int attention_block_rows = 128;

template <typename T>
class CausalSelfAttentionLayer final : public Layer<T> {
 public:
  // Scratch values the layer allocates, whatever the batch: P and dP of one pass of heads.
  static std::size_t scratch_values_for(int steps, int heads) {
    return 2 * std::size_t(heads_in_a_pass(heads)) * steps * steps;
  }

  // block_rows 0: attention_block_rows on the CPU, the whole sequence on a GPU (tests choose
  // smaller blocks to check uneven ones).
  CausalSelfAttentionLayer(kernels::Device& device, int steps, int width, int heads,
                           int block_rows = 0)
      : device_(device),
        steps_(steps),
        width_(width),
        heads_(heads),
        head_width_(width / heads),
        block_rows_(block_rows > 0            ? std::min(steps, block_rows)
                    : device.memory_is_host() ? std::min(steps, attention_block_rows)
                                              : steps),
        probabilities_(device, score_values()),
        probability_gradient_(device, score_values()) {}

  std::string kind() const override { return "causal self-attention"; }
  std::size_t input_size() const override { return 3 * std::size_t(steps_) * width_; }
  std::size_t output_size() const override { return std::size_t(steps_) * width_; }
  std::size_t scratch_values() const override { return scratch_values_for(steps_, heads_); }
  double forward_flops_per_sample() const override {
    return 4.0 * steps_ * double(steps_) * width_;
  }

  void forward(kernels::MathOps<T>& math, int batch, const T* x, T* y) override {
    if constexpr (std::is_same_v<T, float>) {
      if (kernels::AttentionKernel* kernel = fused_kernel()) {
        kernel->forward(batch, x, y);
        return;
      }
    }
    for (int sample = 0; sample < batch; ++sample)
      for (int head = 0; head < heads_; head += heads_in_a_pass(heads_)) {
        const Pass pass = pass_at(sample, head, x);
        attention_weights(math, pass);
        // O = P V, into each head's columns of the output: a block of rows reads the values of
        // its own and earlier steps only.
        for_each_block([&](int first, int rows) {
          batched(math, kernels::Transpose::no, kernels::Transpose::no, rows, head_width_,
                  first + rows, T(1), scores_at(probabilities_.data(), first), steps_,
                  score_stride(), pass.values, qkv_stride(), head_width_,
                  y + output_offset(sample, head) + std::size_t(first) * width_, width_,
                  head_width_, pass.heads);
        });
      }
  }

  void backward(kernels::MathOps<T>& math, int batch, const T* x, const T* /*y*/,
                const T* output_gradient, T* input_gradient) override {
    if constexpr (std::is_same_v<T, float>) {
      if (kernels::AttentionKernel* kernel = fused_kernel()) {
        kernel->backward(batch, x, output_gradient, input_gradient);
        return;
      }
    }
    const std::size_t qkv_row = std::size_t(qkv_stride());
    for (int sample = 0; sample < batch; ++sample)
      for (int head = 0; head < heads_; head += heads_in_a_pass(heads_)) {
        const Pass pass = pass_at(sample, head, x);
        const T* d_output = output_gradient + output_offset(sample, head);
        T* d_queries = input_gradient + input_offset(sample, head);
        T* d_keys = d_queries + width_;
        T* d_values = d_queries + 2 * width_;
        attention_weights(math, pass);
        for_each_block([&](int first, int rows) {
          // dV of the block's keys = P^T dO over the queries at and after them; dP of the
          // block's queries = dO V^T over the keys at and before them.
          batched(math, kernels::Transpose::yes, kernels::Transpose::no, rows, head_width_,
                  steps_ - first, T(1), scores_at(probabilities_.data(), first) + first, steps_,
                  score_stride(), d_output + std::size_t(first) * width_, width_, head_width_,
                  d_values + first * qkv_row, qkv_stride(), head_width_, pass.heads);
          batched(math, kernels::Transpose::no, kernels::Transpose::yes, rows, first + rows,
                  head_width_, T(1), d_output + std::size_t(first) * width_, width_, head_width_,
                  pass.values, qkv_stride(), head_width_,
                  scores_at(probability_gradient_.data(), first), steps_, score_stride(),
                  pass.heads);
        });
        math.causal_softmax_backward(pass.heads, steps_, probabilities_.data(),
                                     probability_gradient_.data());
        for_each_block([&](int first, int rows) {
          // dQ = dS K / sqrt(d) over the keys at and before the block's queries; dK = dS^T Q /
          // sqrt(d) over the queries at and after the block's keys.
          batched(math, kernels::Transpose::no, kernels::Transpose::no, rows, head_width_,
                  first + rows, score_scale(), scores_at(probability_gradient_.data(), first),
                  steps_, score_stride(), pass.keys, qkv_stride(), head_width_,
                  d_queries + first * qkv_row, qkv_stride(), head_width_, pass.heads);
          batched(math, kernels::Transpose::yes, kernels::Transpose::no, rows, head_width_,
                  steps_ - first, score_scale(),
                  scores_at(probability_gradient_.data(), first) + first, steps_, score_stride(),
                  pass.queries + first * qkv_row, qkv_stride(), head_width_,
                  d_keys + first * qkv_row, qkv_stride(), head_width_, pass.heads);
        });
      }
  }

 private:
  // The heads one pass computes, and where the first one's Q, K and V of the sample start.
  struct Pass {
    int heads;
    const T* queries;
    const T* keys;
    const T* values;
  };

  // The device's fused attention, asked for once (float layers only: the double-precision
  // gradient checks always compose it); null where the device has none.
  kernels::AttentionKernel* fused_kernel() {
    if (!fused_asked_) {
      fused_ = device_.make_attention({steps_, width_, heads_});
      fused_asked_ = true;
    }
    return fused_.get();
  }

  static int heads_in_a_pass(int heads) { return std::min(heads, attention_heads_per_pass); }
  std::size_t score_values() const {
    return std::size_t(heads_in_a_pass(heads_)) * steps_ * steps_;
  }
  std::ptrdiff_t score_stride() const { return std::ptrdiff_t(steps_) * steps_; }
  T* scores_at(T* scores, int row) const { return scores + std::size_t(row) * steps_; }
  // A step's Q, K and V are one row of 3 width values.
  int qkv_stride() const { return 3 * width_; }
  T score_scale() const { return T(1 / std::sqrt(double(head_width_))); }
  std::size_t input_offset(int sample, int head) const {
    return std::size_t(sample) * input_size() + std::size_t(head) * head_width_;
  }
  std::size_t output_offset(int sample, int head) const {
    return std::size_t(sample) * output_size() + std::size_t(head) * head_width_;
  }
  Pass pass_at(int sample, int first, const T* x) const {
    const T* queries = x + input_offset(sample, first);
    return {std::min(heads_in_a_pass(heads_), heads_ - first), queries, queries + width_,
            queries + 2 * width_};
  }

  // Calls f(first row, rows) for each block of query rows, in order. Row i attends to steps 0..i
  // only, so a block's GEMMs stop at its last row's step, and the scores above the diagonal's
  // blocks are never computed (causal block skipping, as FlashAttention's): with B blocks,
  // (B - 1) / 2B of the attention GEMMs' work is skipped.
  template <typename Block>
  void for_each_block(Block&& f) const {
    for (int first = 0; first < steps_; first += block_rows_)
      f(first, std::min(block_rows_, steps_ - first));
  }

  static void batched(kernels::MathOps<T>& math, kernels::Transpose transpose_a,
                      kernels::Transpose transpose_b, int m, int n, int k, T alpha, const T* a,
                      int lda, std::ptrdiff_t stride_a, const T* b, int ldb,
                      std::ptrdiff_t stride_b, T* c, int ldc, std::ptrdiff_t stride_c, int count) {
    math.gemm_strided_batched(transpose_a, transpose_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                              stride_b, T(0), c, ldc, stride_c, count);
  }

  // probabilities_ = causal_softmax(Q K^T / sqrt(d)) for the heads of one pass; each block of
  // query rows is scored against the keys up to its last row (the rest is masked anyway).
  void attention_weights(kernels::MathOps<T>& math, const Pass& pass) {
    for_each_block([&](int first, int rows) {
      batched(math, kernels::Transpose::no, kernels::Transpose::yes, rows, first + rows,
              head_width_, score_scale(), pass.queries + std::size_t(first) * qkv_stride(),
              qkv_stride(), head_width_, pass.keys, qkv_stride(), head_width_,
              scores_at(probabilities_.data(), first), steps_, score_stride(), pass.heads);
    });
    math.causal_softmax_forward(pass.heads, steps_, probabilities_.data());
  }

  kernels::Device& device_;
  int steps_;
  int width_;
  int heads_;
  int head_width_;
  int block_rows_;  // query rows per block: attention_block_rows on the CPU, all on a GPU
  kernels::DeviceArray<T> probabilities_;            // P of the pass being computed
  kernels::DeviceArray<T> probability_gradient_;     // dP, then dS, of that pass
  std::unique_ptr<kernels::AttentionKernel> fused_;  // the device's fused attention, if any
  bool fused_asked_ = false;
};

}  // namespace dlscale::model
