// LSTM language models on Markov-chain token sequences.
#include "workloads/lstm_workload.hpp"

#include <fmt/format.h>

#include "model/dense_layer.hpp"
#include "model/embedding_layer.hpp"
#include "model/lstm_layer.hpp"
#include "workloads/model_spec.hpp"
#include "workloads/synthetic_sequences.hpp"

namespace dlscale::workloads {

namespace {
constexpr int largest_size = 1 << 20;
constexpr int default_lstm_batch = 128;
}  // namespace

LstmWorkload::LstmWorkload(std::string name, int steps, int hidden, int layers, int vocabulary,
                           int default_batch)
    : name_(std::move(name)),
      steps_(steps),
      hidden_(hidden),
      layers_(layers),
      vocabulary_(vocabulary),
      default_batch_(default_batch) {}

std::string LstmWorkload::description() const {
  return fmt::format("{} steps: embedding {}, {} LSTM x {}, fc {} at every step", steps_, hidden_,
                     layers_, hidden_, vocabulary_);
}

std::vector<model::LayerShape> LstmWorkload::layer_shapes() const {
  const std::size_t steps = steps_;
  std::vector<model::LayerShape> shapes;
  shapes.push_back({steps, steps * hidden_, std::size_t(vocabulary_) * hidden_});
  for (int layer = 0; layer < layers_; ++layer)
    shapes.push_back({steps * hidden_, steps * hidden_, lstm_geometry().parameter_count()});
  shapes.push_back(
      {steps * hidden_, steps * vocabulary_, std::size_t(hidden_) * vocabulary_ + vocabulary_});
  return shapes;
}

std::size_t LstmWorkload::parameter_count() const {
  std::size_t count = 0;
  for (const auto& shape : layer_shapes()) count += shape.parameter_count;
  return count;
}

double LstmWorkload::training_flops_per_sample() const {
  const double forward =
      layers_ * lstm_geometry().forward_flops_per_sample() + 2.0 * steps_ * hidden_ * vocabulary_;
  return 3 * forward;
}

std::unique_ptr<model::Network<float>> LstmWorkload::build_network(kernels::Device& device,
                                                                   int batch) const {
  std::vector<std::unique_ptr<model::Layer<float>>> layers;
  layers.push_back(std::make_unique<model::EmbeddingLayer<float>>(vocabulary_, hidden_, steps_));
  // The stack as one layer where the device runs it in one call (its gradients then come at
  // once, as those of PyTorch's nn.LSTM(num_layers) do); else a layer each. The parameters, their
  // order and their initial values are the same either way.
  if (layers_ > 1 && device.runs_lstm_stacks()) {
    kernels::LstmGeometry stack = lstm_geometry();
    stack.layers = layers_;
    layers.push_back(std::make_unique<model::LstmLayer>(device, stack));
  } else {
    for (int layer = 0; layer < layers_; ++layer)
      layers.push_back(std::make_unique<model::LstmLayer>(device, lstm_geometry()));
  }
  layers.push_back(std::make_unique<model::DenseLayer<float>>(hidden_, vocabulary_, steps_));
  return std::make_unique<model::Network<float>>(device, std::move(layers), batch, vocabulary_);
}

// Token sequences are cheap to make: one thread (`threads` is for the image and FCN data).
HostBatch LstmWorkload::make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                                   int /*threads*/) const {
  return make_markov_batch(batch, steps_, vocabulary_, seed, rank, batch_index);
}

double LstmWorkload::best_accuracy(std::uint64_t seed) const {
  return markov_best_accuracy(vocabulary_, seed);
}

double LstmWorkload::best_loss(std::uint64_t seed) const {
  return markov_best_loss(vocabulary_, steps_, seed);
}

std::unique_ptr<LstmWorkload> parse_lstm_spec(const std::string& spec) {
  const std::string full_spec = "lstm:" + spec;
  constexpr std::string_view usage = "lstm:SEQ,HIDDEN,LAYERS,VOCAB, e.g. lstm:32,512,2,10000";
  const std::vector<int> sizes = parse_spec_sizes(spec, full_spec, usage, largest_size);
  if (sizes.size() != 4) throw_malformed_spec(full_spec, "it needs exactly 4 sizes", usage);
  if (sizes[3] < 2) throw_malformed_spec(full_spec, "it needs a vocabulary of at least 2", usage);
  return std::make_unique<LstmWorkload>(full_spec, sizes[0], sizes[1], sizes[2], sizes[3],
                                        default_lstm_batch);
}

}  // namespace dlscale::workloads
