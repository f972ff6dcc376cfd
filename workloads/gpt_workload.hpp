// Decoder-only transformer language models in GPT-2's shape (Radford et al. 2019): token and
// position embeddings, pre-norm blocks (layer norm, causal multi-head self-attention, a GELU MLP
// of 4x width, each with a residual), a final layer norm and an output head tied to the token
// embedding, with the loss over every step. A sample is one sequence; the task is the Markov
// chain of the LSTM models (workloads/synthetic_sequences.hpp).
#pragma once

#include "workloads/workload.hpp"

namespace dlscale::workloads {

struct GptShape {
  int layers = 0;
  int width = 0;
  int heads = 0;
  int sequence = 0;  // tokens per sample
  int vocabulary = 0;

  // L (12 W^2 + 13 W) + 2 W + V W + S W: per block the attention's Q, K, V and output projections
  // (4 W^2 + 4 W) and the MLP (8 W^2 + 5 W), each with biases, and two layer norms (4 W); the
  // final layer norm; the token and position tables (the head is the token table).
  std::size_t parameter_count() const;
};

class GptWorkload final : public Workload {
 public:
  GptWorkload(std::string name, GptShape shape, int default_batch);

  std::string name() const override { return name_; }
  std::string family() const override { return "GPT"; }
  std::string description() const override;
  std::size_t parameter_count() const override { return shape_.parameter_count(); }
  // Per sequence: its tokens times 6 N + 12 L W S per token (Chowdhery et al. 2022, PaLM's
  // appendix B; torchtitan and nanoGPT count the same), N the parameters that multiply a token's
  // values: all but the position table, whose lookup costs nothing (the token table's does not
  // either, but the tied head multiplies by it).
  double training_flops_per_sample() const override;
  int default_batch() const override { return default_batch_; }
  std::size_t input_size() const override { return std::size_t(shape_.sequence); }
  int tokens_per_sample() const override { return shape_.sequence; }
  std::vector<model::LayerShape> layer_shapes() const override;

  std::unique_ptr<model::Network<float>> build_network(kernels::Device& device,
                                                       int batch) const override;
  HostBatch make_batch(int batch, std::uint64_t seed, int rank, int batch_index) const override;
  double best_accuracy(std::uint64_t seed) const override;
  double best_loss(std::uint64_t seed) const override;
  bool layers_share_parameters() const override { return true; }

  const GptShape& shape() const { return shape_; }

 private:
  std::string name_;
  GptShape shape_;
  int default_batch_;
};

// Parses "gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY" (the part after "gpt:"). Throws UserError
// naming it.
std::unique_ptr<GptWorkload> parse_gpt_spec(const std::string& spec);

}  // namespace dlscale::workloads
