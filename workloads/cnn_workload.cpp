// Planning and building sequential CNNs.
#include "workloads/cnn_workload.hpp"

#include <stdexcept>

#include "kernels/convolution_layer.hpp"
#include "kernels/dense_layer.hpp"
#include "kernels/pooling_layer.hpp"
#include "kernels/relu_layer.hpp"
#include "workloads/synthetic_classification.hpp"

namespace dlscale::workloads {

namespace {

template <class... Handlers>
struct Overloaded : Handlers... {
  using Handlers::operator()...;
};

std::size_t planned_parameters(const PlannedLayer& layer) {
  return std::visit(Overloaded{
                        [](const kernels::ConvolutionGeometry& g) { return g.parameter_count(); },
                        [](const PlannedDense& d) {
                          return std::size_t(d.inputs) * d.outputs + std::size_t(d.outputs);
                        },
                        [](const auto&) { return std::size_t(0); },
                    },
                    layer);
}

double planned_forward_flops(const PlannedLayer& layer) {
  return std::visit(Overloaded{
                        [](const kernels::ConvolutionGeometry& g) {
                          return g.forward_flops_per_sample();
                        },
                        [](const PlannedDense& d) { return 2.0 * d.inputs * d.outputs; },
                        [](const auto&) { return 0.0; },
                    },
                    layer);
}

kernels::LayerShape planned_shape(const PlannedLayer& layer) {
  return std::visit(
      Overloaded{
          [&](const kernels::ConvolutionGeometry& g) {
            return kernels::LayerShape{g.input.size(), g.output().size(), planned_parameters(layer)};
          },
          [](const kernels::PoolingGeometry& g) {
            return kernels::LayerShape{g.input.size(), g.output().size(), 0};
          },
          [](const PlannedRelu& r) { return kernels::LayerShape{r.size, r.size, 0}; },
          [&](const PlannedDense& d) {
            return kernels::LayerShape{std::size_t(d.inputs), std::size_t(d.outputs),
                                       planned_parameters(layer)};
          },
      },
      layer);
}

}  // namespace

CnnStep convolution(int output_channels, int kernel, int stride, int padding) {
  return {CnnStep::Kind::convolution, output_channels, kernel, stride, padding};
}
CnnStep relu() { return {CnnStep::Kind::relu}; }
CnnStep max_pool(int kernel, int stride, int padding) {
  return {CnnStep::Kind::max_pool, 0, kernel, stride, padding};
}
CnnStep dense(int outputs) { return {CnnStep::Kind::dense, outputs}; }

CnnWorkload::CnnWorkload(std::string name, std::string description, kernels::ImageShape input,
                         std::vector<CnnStep> steps, int default_batch)
    : name_(std::move(name)), description_(std::move(description)), input_(input),
      default_batch_(default_batch) {
  kernels::ImageShape image = input;
  int flat = 0;  // nonzero once a dense layer has flattened the image
  const auto current_size = [&] { return flat > 0 ? std::size_t(flat) : image.size(); };
  for (const CnnStep& step : steps) {
    switch (step.kind) {
      case CnnStep::Kind::convolution: {
        const kernels::ConvolutionGeometry g{image, step.size, step.kernel, step.stride,
                                             step.padding, 1};
        if (flat > 0 || g.output().height < 1) throw std::invalid_argument(name_ + ": bad convolution");
        plan_.push_back(g);
        image = g.output();
        break;
      }
      case CnnStep::Kind::max_pool:
      case CnnStep::Kind::average_pool: {
        const kernels::PoolingGeometry g{image,
                                         step.kind == CnnStep::Kind::max_pool
                                             ? kernels::PoolingKind::max
                                             : kernels::PoolingKind::average,
                                         step.kernel, step.stride, step.padding};
        if (flat > 0 || g.output().height < 1) throw std::invalid_argument(name_ + ": bad pooling");
        plan_.push_back(g);
        image = g.output();
        break;
      }
      case CnnStep::Kind::relu:
        plan_.push_back(PlannedRelu{current_size()});
        break;
      case CnnStep::Kind::dense:
        plan_.push_back(PlannedDense{int(current_size()), step.size});
        flat = step.size;
        break;
    }
  }
  if (flat < 2) throw std::invalid_argument(name_ + ": a CNN must end in a dense classifier");
  classes_ = flat;
}

std::size_t CnnWorkload::parameter_count() const {
  std::size_t count = 0;
  for (const auto& layer : plan_) count += planned_parameters(layer);
  return count;
}

double CnnWorkload::training_flops_per_sample() const {
  double forward = 0;
  for (const auto& layer : plan_) forward += planned_forward_flops(layer);
  return 3 * forward;
}

std::size_t CnnWorkload::network_device_bytes(int batch) const {
  std::vector<kernels::LayerShape> shapes;
  for (const auto& layer : plan_) shapes.push_back(planned_shape(layer));
  return kernels::Network<float>::device_bytes(shapes, batch);
}

std::unique_ptr<kernels::Network<float>> CnnWorkload::build_network(kernels::Device& device,
                                                                   int batch) const {
  std::vector<std::unique_ptr<kernels::Layer<float>>> layers;
  for (const auto& planned : plan_)
    layers.push_back(std::visit(
        Overloaded{
            [&](const kernels::ConvolutionGeometry& g) -> std::unique_ptr<kernels::Layer<float>> {
              return std::make_unique<kernels::ConvolutionLayer>(device, g);
            },
            [&](const kernels::PoolingGeometry& g) -> std::unique_ptr<kernels::Layer<float>> {
              return std::make_unique<kernels::PoolingLayer>(device, g);
            },
            [](const PlannedRelu& r) -> std::unique_ptr<kernels::Layer<float>> {
              return std::make_unique<kernels::ReluLayer<float>>(r.size);
            },
            [](const PlannedDense& d) -> std::unique_ptr<kernels::Layer<float>> {
              return std::make_unique<kernels::DenseLayer<float>>(d.inputs, d.outputs);
            },
        },
        planned));
  return std::make_unique<kernels::Network<float>>(device, std::move(layers), batch);
}

HostBatch CnnWorkload::make_batch(int batch, std::uint64_t seed, int rank, int batch_index) const {
  return make_prototype_batch(batch, int(input_.size()), classes_, seed, rank, batch_index);
}

}  // namespace dlscale::workloads
