// GPT models: the network as a flat stack of layers, each block two residual layers (attention,
// then MLP), and their counts.
#include "workloads/gpt_workload.hpp"

#include <fmt/format.h>

#include "model/residual_block.hpp"
#include "workloads/model_spec.hpp"
#include "workloads/synthetic_sequences.hpp"

namespace dlscale::workloads {

namespace {

constexpr int largest_size = 1 << 20;
constexpr int default_gpt_batch = 8;
// Beyond this a spec is a typo, not a model: GPT-3 has 1.75e11.
constexpr double most_parameters = 1e12;

std::size_t dense_parameters(int inputs, int outputs) {
  return std::size_t(inputs) * outputs + outputs;
}

// A block's two residual branches, as layer shapes.
std::vector<model::LayerShape> attention_branch(const GptShape& s) {
  const std::size_t steps = s.sequence, width = s.width;
  return {{steps * width, steps * width, 2 * width, 2 * steps},  // layer norm
          {steps * width, 3 * steps * width, dense_parameters(s.width, 3 * s.width)},
          {3 * steps * width, steps * width, 0, 0,
           model::CausalSelfAttentionLayer<float>::scratch_values_for(s.sequence, s.heads)},
          {steps * width, steps * width, dense_parameters(s.width, s.width)}};
}
std::vector<model::LayerShape> mlp_branch(const GptShape& s) {
  const std::size_t steps = s.sequence, width = s.width;
  return {{steps * width, steps * width, 2 * width, 2 * steps},  // layer norm
          {steps * width, 4 * steps * width, dense_parameters(s.width, 4 * s.width)},
          {4 * steps * width, 4 * steps * width},  // GELU
          {4 * steps * width, steps * width, dense_parameters(4 * s.width, s.width)}};
}
model::LayerShape residual_shape(const std::vector<model::LayerShape>& branch) {
  model::LayerShape shape{branch.front().input_size, branch.back().output_size, 0,
                          model::ResidualBlock<float>::internal_values(branch, {})};
  for (const auto& layer : branch) {
    shape.parameter_count += layer.parameter_count;
    shape.scratch_values += layer.scratch_values;
  }
  return shape;
}

}  // namespace

std::size_t GptShape::parameter_count() const {
  const std::size_t l = layers, w = width, v = vocabulary, s = sequence;
  return l * (12 * w * w + 13 * w) + 2 * w + v * w + s * w;
}

GptWorkload::GptWorkload(std::string name, GptShape shape, int default_batch)
    : name_(std::move(name)), shape_(shape), default_batch_(default_batch) {}

std::string GptWorkload::description() const {
  return fmt::format("{} tokens: {} blocks x {} wide, {} heads, vocabulary {}, tied head",
                     shape_.sequence, shape_.layers, shape_.width, shape_.heads, shape_.vocabulary);
}

double GptWorkload::training_flops_per_sample() const {
  const double position_table = double(shape_.sequence) * shape_.width;
  const double multiplying_parameters = double(parameter_count()) - position_table;
  const double per_token =
      6 * multiplying_parameters + 12.0 * shape_.layers * double(shape_.width) * shape_.sequence;
  return per_token * shape_.sequence;
}

std::vector<model::LayerShape> GptWorkload::layer_shapes() const {
  const std::size_t steps = shape_.sequence, width = shape_.width;
  std::vector<model::LayerShape> shapes;
  shapes.push_back({steps, steps * width, std::size_t(shape_.vocabulary) * width + steps * width});
  for (int block = 0; block < shape_.layers; ++block) {
    shapes.push_back(residual_shape(attention_branch(shape_)));
    shapes.push_back(residual_shape(mlp_branch(shape_)));
  }
  shapes.push_back({steps * width, steps * width, 2 * width, 2 * steps});
  shapes.push_back({steps * width, steps * shape_.vocabulary});  // the tied head
  return shapes;
}

std::unique_ptr<model::Network<float>> GptWorkload::build_network(kernels::Device& device,
                                                                  int batch) const {
  return std::make_unique<model::Network<float>>(device, make_layers<float>(device, batch), batch,
                                                 shape_.vocabulary);
}

// Token sequences are cheap to make: one thread (`threads` is for the image and FCN data).
HostBatch GptWorkload::make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                                  int /*threads*/) const {
  return make_markov_batch(batch, shape_.sequence, shape_.vocabulary, seed, rank, batch_index);
}

double GptWorkload::best_accuracy(std::uint64_t seed) const {
  return markov_best_accuracy(shape_.vocabulary, seed);
}

double GptWorkload::best_loss(std::uint64_t seed) const {
  return markov_best_loss(shape_.vocabulary, shape_.sequence, seed);
}

std::unique_ptr<GptWorkload> parse_gpt_spec(const std::string& spec) {
  const std::string full_spec = "gpt:" + spec;
  constexpr std::string_view usage =
      "gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY, e.g. gpt:12,768,12,1024,50257";
  const std::vector<int> sizes = parse_spec_sizes(spec, full_spec, usage, largest_size);
  if (sizes.size() != 5) throw_malformed_spec(full_spec, "it needs exactly 5 sizes", usage);
  const GptShape shape{sizes[0], sizes[1], sizes[2], sizes[3], sizes[4]};
  if (shape.width % shape.heads != 0)
    throw_malformed_spec(
        full_spec, fmt::format("width {} is not a multiple of {} heads", shape.width, shape.heads),
        usage);
  if (shape.vocabulary < 2)
    throw_malformed_spec(full_spec, "it needs a vocabulary of at least 2", usage);
  if (double(shape.parameter_count()) > most_parameters)
    throw_malformed_spec(full_spec,
                         fmt::format("{:.3g} parameters is more than {:.0e}",
                                     double(shape.parameter_count()), most_parameters),
                         usage);
  // One sample's logits and MLP activations are indexed with ints in the kernels.
  const double largest_sample =
      std::max(double(shape.sequence) * shape.vocabulary, 4.0 * shape.sequence * shape.width);
  if (largest_sample > double(std::numeric_limits<int>::max()))
    throw_malformed_spec(full_spec,
                         fmt::format("one sequence would hold {:.3g} values in a layer, more than "
                                     "{}",
                                     largest_sample, std::numeric_limits<int>::max()),
                         usage);
  return std::make_unique<GptWorkload>(full_spec, shape, default_gpt_batch);
}

}  // namespace dlscale::workloads
