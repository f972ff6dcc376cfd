// FCN workloads and their synthetic data: Gaussian inputs labelled by a random low-rank linear
// teacher, so the classes are learnable and the loss falls.
#include "workloads/fcn_workload.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/random.hpp"

namespace dlscale::workloads {

namespace {

// The teacher is inputs -> rank-64 projection -> class scores; its label is the top score.
constexpr int teacher_rank = 64;
constexpr std::uint64_t teacher_projection_stream = 0x7eac4e1;
constexpr std::uint64_t teacher_readout_stream = 0x7eac4e2;
constexpr std::uint64_t input_stream_base = 0x1a9e700000000000ULL;
constexpr int largest_layer = 1 << 20;

}  // namespace

FcnWorkload::FcnWorkload(std::string name, std::vector<int> layer_sizes, int default_batch)
    : name_(std::move(name)), layer_sizes_(std::move(layer_sizes)), default_batch_(default_batch) {}

std::string FcnWorkload::description() const {
  return fmt::format("{}, sigmoid", fmt::join(layer_sizes_, "-"));
}

std::size_t FcnWorkload::parameter_count() const {
  std::size_t count = 0;
  for (const auto& layer : make_layers<float>()) count += layer->parameter_count();
  return count;
}

double FcnWorkload::training_flops_per_sample() const {
  double forward = 0;
  for (const auto& layer : make_layers<float>()) forward += layer->forward_flops_per_sample();
  return 3 * forward;
}

std::unique_ptr<kernels::Network<float>> FcnWorkload::build_network(kernels::Device& device,
                                                                    int batch) const {
  return std::make_unique<kernels::Network<float>>(device, make_layers<float>(), batch);
}

HostBatch FcnWorkload::make_batch(int batch, std::uint64_t seed, int rank, int batch_index) const {
  const int inputs = layer_sizes_.front();
  const int classes = layer_sizes_.back();
  const CounterRandom projection_random(seed, teacher_projection_stream);
  const CounterRandom readout_random(seed, teacher_readout_stream);
  const CounterRandom input_random(
      seed, input_stream_base + (std::uint64_t(rank) << 32) + std::uint64_t(batch_index));

  HostBatch data;
  data.inputs.resize(std::size_t(batch) * inputs);
  for (std::size_t i = 0; i < data.inputs.size(); ++i)
    data.inputs[i] = float(input_random.normal(i));

  // projected[b][r] = sum_i x[b][i] * P[i][r]; P is generated row by row, never stored whole.
  std::vector<double> projected(std::size_t(batch) * teacher_rank, 0.0);
  std::vector<double> projection_row(teacher_rank);
  for (int i = 0; i < inputs; ++i) {
    for (int r = 0; r < teacher_rank; ++r)
      projection_row[r] = projection_random.normal(std::size_t(i) * teacher_rank + r);
    for (int b = 0; b < batch; ++b) {
      const double x = data.inputs[std::size_t(b) * inputs + i];
      for (int r = 0; r < teacher_rank; ++r)
        projected[std::size_t(b) * teacher_rank + r] += x * projection_row[r];
    }
  }
  std::vector<double> scores(std::size_t(batch) * classes, 0.0);
  for (int r = 0; r < teacher_rank; ++r)
    for (int c = 0; c < classes; ++c) {
      const double weight = readout_random.normal(std::size_t(r) * classes + c);
      for (int b = 0; b < batch; ++b)
        scores[std::size_t(b) * classes + c] += projected[std::size_t(b) * teacher_rank + r] * weight;
    }
  data.labels.resize(batch);
  for (int b = 0; b < batch; ++b) {
    const auto row = scores.begin() + std::ptrdiff_t(b) * classes;
    data.labels[b] = std::int32_t(std::max_element(row, row + classes) - row);
  }
  return data;
}

std::unique_ptr<FcnWorkload> parse_fcn_spec(const std::string& spec) {
  const auto malformed = [&](std::string_view why) {
    return UserError(fmt::format(
        "--model: malformed FCN spec 'fcn:{}': {} (expected fcn:INPUT,HIDDEN,...,CLASSES, e.g. "
        "fcn:784,2048,10)",
        spec, why));
  };
  std::vector<int> sizes;
  std::size_t start = 0;
  while (start <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view field(spec.data() + start, comma - start);
    int size = 0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), size);
    if (field.empty() || error != std::errc() || end != field.data() + field.size())
      throw malformed(fmt::format("'{}' is not a whole number", field));
    if (size < 1 || size > largest_layer)
      throw malformed(fmt::format("layer size {} is outside 1..{}", size, largest_layer));
    sizes.push_back(size);
    start = comma + 1;
  }
  if (sizes.size() < 2) throw malformed("it needs at least an input and an output size");
  if (sizes.back() < 2) throw malformed("it needs at least 2 classes");
  return std::make_unique<FcnWorkload>("fcn:" + spec, std::move(sizes), 64);
}

}  // namespace dlscale::workloads
