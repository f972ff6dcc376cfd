// Counting and building planned layers.
#include "workloads/network_plan.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "model/batch_norm_layer.hpp"
#include "model/convolution_layer.hpp"
#include "model/dense_layer.hpp"
#include "model/pooling_layer.hpp"
#include "model/relu_layer.hpp"
#include "model/residual_block.hpp"

namespace dlscale::workloads {

namespace {

template <class... Handlers>
struct Overloaded : Handlers... {
  using Handlers::operator()...;
};

using Residual = std::shared_ptr<const PlannedResidual>;

std::vector<model::LayerShape> shapes_of(const std::vector<PlannedLayer>& layers) {
  std::vector<model::LayerShape> shapes;
  for (const auto& layer : layers) shapes.push_back(shape_of(layer));
  return shapes;
}

}  // namespace

model::LayerShape shape_of(const PlannedLayer& layer) {
  return std::visit(
      Overloaded{
          [](const kernels::ConvolutionGeometry& g) {
            return model::LayerShape{g.input.size(), g.output().size(), g.parameter_count(),
                                     model::ConvolutionLayer::internal_values_of(g)};
          },
          [](const kernels::PoolingGeometry& g) {
            return model::LayerShape{g.input.size(), g.output().size()};
          },
          [](const PlannedBatchNorm& b) {
            return model::LayerShape{b.shape.size(), b.shape.size(),
                                     2 * std::size_t(b.shape.channels)};
          },
          [](const PlannedRelu& r) {
            return model::LayerShape{r.size, r.size};
          },
          [](const PlannedDense& d) {
            return model::LayerShape{std::size_t(d.inputs), std::size_t(d.outputs),
                                     std::size_t(d.inputs) * d.outputs + d.outputs};
          },
          [](const Residual& r) {
            const auto branch = shapes_of(r->branch), shortcut = shapes_of(r->shortcut);
            std::size_t parameters = 0, scratch = 0;
            for (const auto* path : {&branch, &shortcut})
              for (const auto& shape : *path) {
                parameters += shape.parameter_count;
                scratch += shape.scratch_values;
              }
            return model::LayerShape{
                branch.front().input_size, branch.back().output_size, parameters,
                model::ResidualBlock<float>::internal_values(branch, shortcut), scratch};
          },
      },
      layer);
}

double forward_flops_of(const PlannedLayer& layer) {
  return std::visit(
      Overloaded{
          [](const kernels::ConvolutionGeometry& g) { return g.forward_flops_per_sample(); },
          [](const PlannedDense& d) { return 2.0 * d.inputs * d.outputs; },
          [](const Residual& r) {
            double flops = 0;
            for (const auto* path : {&r->branch, &r->shortcut})
              for (const auto& inner : *path) flops += forward_flops_of(inner);
            return flops;
          },
          [](const auto&) { return 0.0; },
      },
      layer);
}

std::unique_ptr<model::Layer<float>> build_layer(kernels::Device& device, const PlannedLayer& layer,
                                                 int max_batch) {
  using LayerPointer = std::unique_ptr<model::Layer<float>>;
  return std::visit(
      Overloaded{
          [&](const kernels::ConvolutionGeometry& g) -> LayerPointer {
            return std::make_unique<model::ConvolutionLayer>(device, g);
          },
          [&](const kernels::PoolingGeometry& g) -> LayerPointer {
            return std::make_unique<model::PoolingLayer>(device, g);
          },
          [&](const PlannedBatchNorm& b) -> LayerPointer {
            return std::make_unique<model::BatchNormLayer>(device, b);
          },
          [](const PlannedRelu& r) -> LayerPointer {
            return std::make_unique<model::ReluLayer<float>>(r.size, r.ceiling, r.native_image);
          },
          [](const PlannedDense& d) -> LayerPointer {
            return std::make_unique<model::DenseLayer<float>>(d.inputs, d.outputs);
          },
          [&](const Residual& r) -> LayerPointer {
            model::ResidualBlock<float>::Layers branch, shortcut;
            for (const auto& inner : r->branch)
              branch.push_back(build_layer(device, inner, max_batch));
            for (const auto& inner : r->shortcut)
              shortcut.push_back(build_layer(device, inner, max_batch));
            return std::make_unique<model::ResidualBlock<float>>(
                device, std::move(branch), std::move(shortcut), r->relu_after, max_batch,
                model::ResidualBlock<float>::NativeImages{r->native_input, r->native_output});
          },
      },
      layer);
}

void PlanBuilder::require_image(const char* layer) const {
  if (flattened_ > 0) throw std::invalid_argument(std::string(layer) + " after a dense layer");
}

PlanBuilder& PlanBuilder::convolution(int output_channels, int kernel, int stride, int padding,
                                      int groups, bool bias) {
  require_image("convolution");
  const kernels::ConvolutionGeometry g{image_, output_channels, kernel,
                                       stride, padding,         groups,
                                       bias,   layout_,         kernels::ImageLayout::native};
  if (image_.channels % groups != 0 || output_channels % groups != 0 || g.output().height < 1 ||
      g.output().width < 1)
    throw std::invalid_argument("convolution does not fit its input");
  layers_.push_back(g);
  image_ = g.output();
  layout_ = g.output_layout;
  return *this;
}

PlanBuilder& PlanBuilder::batch_norm() {
  require_image("batch norm");
  layers_.push_back(PlannedBatchNorm{image_, layout_, false});
  return *this;
}

// A ReLU right after a batch norm or convolution is fused into it (docs/workloads.md): one
// memory pass fewer forward, and one activation fewer to keep.
PlanBuilder& PlanBuilder::relu(float ceiling) {
  if (!layers_.empty() && std::isinf(ceiling)) {
    if (auto* batch_norm = std::get_if<PlannedBatchNorm>(&layers_.back());
        batch_norm != nullptr && !batch_norm->relu) {
      batch_norm->relu = true;
      return *this;
    }
    if (auto* convolution = std::get_if<kernels::ConvolutionGeometry>(&layers_.back());
        convolution != nullptr && !convolution->relu) {
      convolution->relu = true;
      return *this;
    }
  }
  layers_.push_back(
      PlannedRelu{size(), ceiling, flattened_ == 0 && layout_ == kernels::ImageLayout::native});
  return *this;
}

PlanBuilder& PlanBuilder::add_pooling(const kernels::PoolingGeometry& g) {
  require_image("pooling");
  if (g.output().height < 1 || g.output().width < 1)
    throw std::invalid_argument("pooling does not fit its input");
  layers_.push_back(g);
  image_ = g.output();
  layout_ = g.output_layout;
  return *this;
}

PlanBuilder& PlanBuilder::max_pool(int kernel, int stride, int padding) {
  return add_pooling({image_, kernels::PoolingKind::max, kernel, stride, padding, layout_,
                      kernels::ImageLayout::native});
}

PlanBuilder& PlanBuilder::global_average_pool() {
  if (image_.height != image_.width)
    throw std::invalid_argument("global average pooling of a non-square image");
  return add_pooling({image_, kernels::PoolingKind::average, image_.height, 1, 0, layout_,
                      kernels::ImageLayout::native});
}

PlanBuilder& PlanBuilder::dense(int outputs) {
  // The image a dense layer flattens is handed over in plain NCHW, whatever the device's native
  // layout: so the same weights are the same model on every device, and a CPU and a GPU run can
  // be compared value by value. The last pooling or convolution writes it (ReLUs in between are
  // element-wise); for the zoo that is a small pooled image, so the reorder costs nothing.
  if (flattened_ == 0 && layout_ != kernels::ImageLayout::nchw) {
    // The ReLUs in between now run on the NCHW image (which holds floats on every device).
    auto last = layers_.rbegin();
    for (; last != layers_.rend() && std::holds_alternative<PlannedRelu>(*last); ++last)
      std::get<PlannedRelu>(*last).native_image = false;
    if (last == layers_.rend())
      throw std::invalid_argument("a dense layer after an image needs a layer that writes it");
    if (auto* pooling = std::get_if<kernels::PoolingGeometry>(&*last))
      pooling->output_layout = kernels::ImageLayout::nchw;
    else if (auto* convolution = std::get_if<kernels::ConvolutionGeometry>(&*last))
      convolution->output_layout = kernels::ImageLayout::nchw;
    else
      throw std::invalid_argument("a dense layer must follow a pooling or convolution layer");
    layout_ = kernels::ImageLayout::nchw;
  }
  layers_.push_back(PlannedDense{int(size()), outputs});
  flattened_ = outputs;
  return *this;
}

PlanBuilder& PlanBuilder::residual(const std::function<void(PlanBuilder&)>& branch,
                                   const std::function<void(PlanBuilder&)>& shortcut,
                                   bool relu_after) {
  require_image("residual block");
  PlanBuilder branch_builder(image_, layout_);
  branch(branch_builder);
  PlanBuilder shortcut_builder(image_, layout_);
  if (shortcut) shortcut(shortcut_builder);
  const auto& branch_out = branch_builder.image();
  const auto& shortcut_out = shortcut_builder.image();
  if (branch_builder.layers().empty() || branch_out.channels != shortcut_out.channels ||
      branch_out.height != shortcut_out.height || branch_out.width != shortcut_out.width)
    throw std::invalid_argument("residual paths end in different shapes");
  if (branch_builder.layout() != shortcut_builder.layout())
    throw std::invalid_argument("residual paths end in different layouts");
  layers_.push_back(std::make_shared<const PlannedResidual>(
      PlannedResidual{branch_builder.layers(), shortcut_builder.layers(), relu_after,
                      layout_ == kernels::ImageLayout::native,
                      branch_builder.layout() == kernels::ImageLayout::native}));
  image_ = branch_out;
  layout_ = branch_builder.layout();
  return *this;
}

}  // namespace dlscale::workloads
