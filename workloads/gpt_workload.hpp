// Decoder-only transformer language models in GPT-2's shape (Radford et al. 2019): token and
// position embeddings, pre-norm blocks (layer norm, causal multi-head self-attention, a GELU MLP
// of 4x width, each with a residual), a final layer norm and an output head tied to the token
// embedding, with the loss over every step. A sample is one sequence; the task is the Markov
// chain of the LSTM models (workloads/synthetic_sequences.hpp).
#pragma once

#include "model/causal_self_attention_layer.hpp"
#include "model/dense_layer.hpp"
#include "model/embedding_layer.hpp"
#include "model/gelu_layer.hpp"
#include "model/layer_norm_layer.hpp"
#include "model/residual_block.hpp"
#include "model/tied_output_head.hpp"
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
  HostBatch make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                       int threads = 1) const override;
  double best_accuracy(std::uint64_t seed) const override;
  double best_loss(std::uint64_t seed) const override;
  bool layers_share_parameters() const override { return true; }

  const GptShape& shape() const { return shape_; }

  // The layers, in any precision (the gradient checks build them in double): the embedding, two
  // residual layers a block (attention, then MLP), the final layer norm and the tied head.
  template <typename T>
  std::vector<std::unique_ptr<model::Layer<T>>> make_layers(kernels::Device& device,
                                                            int batch) const {
    using Layers = std::vector<std::unique_ptr<model::Layer<T>>>;
    const auto [layers, width, heads, steps, vocabulary] = shape_;
    Layers network;
    auto embedding = std::make_unique<model::EmbeddingLayer<T>>(
        vocabulary, width, steps, model::EmbeddingOptions{true, embedding_deviation});
    auto& token_table = *embedding;
    network.push_back(std::move(embedding));
    for (int block = 0; block < layers; ++block) {
      Layers attention;
      attention.push_back(std::make_unique<model::LayerNormLayer<T>>(device, width, steps, batch));
      attention.push_back(std::make_unique<model::DenseLayer<T>>(width, 3 * width, steps));
      attention.push_back(
          std::make_unique<model::CausalSelfAttentionLayer<T>>(device, steps, width, heads));
      attention.push_back(std::make_unique<model::DenseLayer<T>>(width, width, steps));
      network.push_back(std::make_unique<model::ResidualBlock<T>>(device, std::move(attention),
                                                                  Layers{}, false, batch));
      Layers mlp;
      mlp.push_back(std::make_unique<model::LayerNormLayer<T>>(device, width, steps, batch));
      mlp.push_back(std::make_unique<model::DenseLayer<T>>(width, 4 * width, steps));
      mlp.push_back(std::make_unique<model::GeluLayer<T>>(std::size_t(steps) * 4 * width));
      mlp.push_back(std::make_unique<model::DenseLayer<T>>(4 * width, width, steps));
      network.push_back(std::make_unique<model::ResidualBlock<T>>(device, std::move(mlp), Layers{},
                                                                  false, batch));
    }
    network.push_back(std::make_unique<model::LayerNormLayer<T>>(device, width, steps, batch));
    network.push_back(
        std::make_unique<model::TiedOutputHead<T>>(token_table, width, vocabulary, steps));
    return network;
  }

 private:
  // GPT-2's initial embeddings, N(0, 0.02^2).
  static constexpr double embedding_deviation = 0.02;

  std::string name_;
  GptShape shape_;
  int default_batch_;
};

// Parses "gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY" (the part after "gpt:"). Throws UserError
// naming it.
std::unique_ptr<GptWorkload> parse_gpt_spec(const std::string& spec);

}  // namespace dlscale::workloads
