// FCN workloads: dense layers with sigmoid between them, trained on prototype-plus-noise data.
#include "workloads/fcn_workload.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workloads/model_spec.hpp"
#include "workloads/synthetic_classification.hpp"

namespace dlscale::workloads {

namespace {
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

std::vector<model::LayerShape> FcnWorkload::layer_shapes() const {
  std::vector<model::LayerShape> shapes;
  for (const auto& layer : make_layers<float>()) shapes.push_back(layer->shape());
  return shapes;
}

std::unique_ptr<model::Network<float>> FcnWorkload::build_network(kernels::Device& device,
                                                                  int batch) const {
  return std::make_unique<model::Network<float>>(device, make_layers<float>(), batch);
}

HostBatch FcnWorkload::make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                                  int threads) const {
  return make_prototype_batch(batch, layer_sizes_.front(), layer_sizes_.back(), seed, rank,
                              batch_index, threads);
}

double FcnWorkload::best_accuracy(std::uint64_t /*seed*/) const {
  return prototype_best_accuracy(layer_sizes_.front());
}

std::unique_ptr<FcnWorkload> parse_fcn_spec(const std::string& spec) {
  const std::string full_spec = "fcn:" + spec;
  constexpr std::string_view usage = "fcn:INPUT,HIDDEN,...,CLASSES, e.g. fcn:784,2048,10";
  std::vector<int> sizes = parse_spec_sizes(spec, full_spec, usage, largest_layer);
  if (sizes.size() < 2)
    throw_malformed_spec(full_spec, "it needs at least an input and an output size", usage);
  if (sizes.back() < 2) throw_malformed_spec(full_spec, "it needs at least 2 classes", usage);
  return std::make_unique<FcnWorkload>(full_spec, std::move(sizes), 64);
}

}  // namespace dlscale::workloads
