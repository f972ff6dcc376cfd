// A network planned as layer geometries before anything is built: enough to count parameters,
// FLOPs and memory without a device, and then to build the layers on one. PlanBuilder writes a
// plan the way the papers describe the networks, tracking the image shape from layer to layer,
// and its layout: the input data is plain NCHW, and every image layer writes the device's native
// layout, which the next one reads as it is.
#pragma once

#include <functional>
#include <limits>
#include <memory>
#include <variant>
#include <vector>

#include "kernels/image_kernels.hpp"
#include "model/layer.hpp"

namespace dlscale::workloads {

using PlannedBatchNorm = kernels::BatchNormGeometry;
struct PlannedRelu {
  std::size_t size;
  float ceiling;
  bool native_image = false;  // on images in ImageLayout::native (ReluLayer)
};
struct PlannedDense {
  int inputs, outputs;
};
struct PlannedResidual;
using PlannedLayer =
    std::variant<kernels::ConvolutionGeometry, kernels::PoolingGeometry, PlannedBatchNorm,
                 PlannedRelu, PlannedDense, std::shared_ptr<const PlannedResidual>>;
struct PlannedResidual {
  std::vector<PlannedLayer> branch;
  std::vector<PlannedLayer> shortcut;  // empty: identity
  bool relu_after;
  // Whether the block's input and output lie in ImageLayout::native (ResidualBlock::NativeImages).
  bool native_input = false, native_output = false;
};

model::LayerShape shape_of(const PlannedLayer& layer);
double forward_flops_of(const PlannedLayer& layer);
std::unique_ptr<model::Layer<float>> build_layer(kernels::Device& device, const PlannedLayer& layer,
                                                 int max_batch);

// Every method throws std::invalid_argument when a layer does not fit its input: that is a
// mistake in a network definition, caught by the workload tests.
class PlanBuilder {
 public:
  explicit PlanBuilder(kernels::ImageShape input,
                       kernels::ImageLayout layout = kernels::ImageLayout::nchw)
      : image_(input), layout_(layout) {}

  PlanBuilder& convolution(int output_channels, int kernel, int stride = 1, int padding = 0,
                           int groups = 1, bool bias = true);
  PlanBuilder& batch_norm();
  // Folded into a batch norm right before it (one pass instead of two); ReLU6 stays a layer.
  PlanBuilder& relu(float ceiling = std::numeric_limits<float>::infinity());
  PlanBuilder& max_pool(int kernel, int stride, int padding = 0);
  PlanBuilder& global_average_pool();
  PlanBuilder& dense(int outputs);
  // Adds y = activation(branch(x) + shortcut(x)); each callback writes its path from the current
  // shape; a null shortcut is the identity.
  PlanBuilder& residual(const std::function<void(PlanBuilder&)>& branch,
                        const std::function<void(PlanBuilder&)>& shortcut, bool relu_after);

  const std::vector<PlannedLayer>& layers() const { return layers_; }
  const kernels::ImageShape& image() const { return image_; }
  kernels::ImageLayout layout() const { return layout_; }
  std::size_t size() const { return flattened_ > 0 ? std::size_t(flattened_) : image_.size(); }
  int outputs() const { return flattened_; }  // classes, once a dense layer has been added

 private:
  PlanBuilder& add_pooling(const kernels::PoolingGeometry& geometry);
  void require_image(const char* layer) const;

  std::vector<PlannedLayer> layers_;
  kernels::ImageShape image_;
  kernels::ImageLayout layout_;
  int flattened_ = 0;  // nonzero once a dense layer has flattened the image
};

}  // namespace dlscale::workloads
