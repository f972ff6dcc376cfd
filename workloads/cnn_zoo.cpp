// Layer lists of the CNN workloads. Convolutions followed by batch norm have no bias, as in the
// papers and in torchvision, so the parameter counts match the reference table.
#include "workloads/cnn_zoo.hpp"

#include "workloads/cnn_workload.hpp"

namespace dlscale::workloads {

namespace {

constexpr kernels::ImageShape cifar_image{3, 32, 32};
constexpr kernels::ImageShape imagenet_image{3, 224, 224};
constexpr float relu6_ceiling = 6;

// Cifar-10 net of the reference study: 32x32 -> 15 -> 7 -> 3 after its 3x3/2 poolings.
PlanBuilder alexnet_r() {
  PlanBuilder plan(cifar_image);
  for (int channels : {32, 32, 64}) plan.convolution(channels, 5, 1, 2).relu().max_pool(3, 2);
  plan.dense(10);
  return plan;
}

// AlexNet without LRN, dropout or batch norm, with torchvision's layer sizes.
PlanBuilder alexnet_s() {
  PlanBuilder plan(imagenet_image);
  plan.convolution(64, 11, 4, 2).relu().max_pool(3, 2);
  plan.convolution(192, 5, 1, 2).relu().max_pool(3, 2);
  plan.convolution(384, 3, 1, 1).relu().convolution(256, 3, 1, 1).relu();
  plan.convolution(256, 3, 1, 1).relu().max_pool(3, 2);
  plan.dense(4096).relu().dense(4096).relu().dense(1000);
  return plan;
}

// VGG-16 (configuration D): 0 marks a 2x2 max pooling.
PlanBuilder vgg_16() {
  PlanBuilder plan(imagenet_image);
  for (int channels :
       {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}) {
    if (channels == 0)
      plan.max_pool(2, 2);
    else
      plan.convolution(channels, 3, 1, 1).relu();
  }
  plan.dense(4096).relu().dense(4096).relu().dense(1000);
  return plan;
}

// A projection shortcut (1x1 convolution and batch norm) where the shape changes, else identity.
std::function<void(PlanBuilder&)> shortcut_to(int input_channels, int output_channels, int stride) {
  if (stride == 1 && input_channels == output_channels) return nullptr;
  return [=](PlanBuilder& path) {
    path.convolution(output_channels, 1, stride, 0, 1, false).batch_norm();
  };
}

// Cifar ResNet-56 (He et al. 2016, section 4.2): 3 stages of 9 basic blocks, 16/32/64 channels.
PlanBuilder resnet_56() {
  PlanBuilder plan(cifar_image);
  plan.convolution(16, 3, 1, 1, 1, false).batch_norm().relu();
  int channels = 16;
  for (int stage_channels : {16, 32, 64})
    for (int block = 0; block < 9; ++block) {
      const int stride = block == 0 && stage_channels != 16 ? 2 : 1;
      plan.residual(
          [&](PlanBuilder& path) {
            path.convolution(stage_channels, 3, stride, 1, 1, false).batch_norm().relu();
            path.convolution(stage_channels, 3, 1, 1, 1, false).batch_norm();
          },
          shortcut_to(channels, stage_channels, stride), true);
      channels = stage_channels;
    }
  plan.global_average_pool().dense(10);
  return plan;
}

// ResNet-50 v1: bottleneck blocks, the stride on the first 1x1 convolution of a stage.
PlanBuilder resnet_50() {
  PlanBuilder plan(imagenet_image);
  plan.convolution(64, 7, 2, 3, 1, false).batch_norm().relu().max_pool(3, 2, 1);
  int channels = 64;
  const std::pair<int, int> stages[] = {{64, 3}, {128, 4}, {256, 6}, {512, 3}};
  for (const auto& [width, blocks] : stages)
    for (int block = 0; block < blocks; ++block) {
      const int stride = block == 0 && width != 64 ? 2 : 1;
      plan.residual(
          [&](PlanBuilder& path) {
            path.convolution(width, 1, stride, 0, 1, false).batch_norm().relu();
            path.convolution(width, 3, 1, 1, 1, false).batch_norm().relu();
            path.convolution(4 * width, 1, 1, 0, 1, false).batch_norm();
          },
          shortcut_to(channels, 4 * width, stride), true);
      channels = 4 * width;
    }
  plan.global_average_pool().dense(1000);
  return plan;
}

// MobileNet v2 x1.0 (Sandler et al. 2018, table 2): inverted residual blocks with depthwise
// convolutions and linear bottlenecks; the skip connection only where stride 1 keeps the shape.
PlanBuilder mobilenet_v2() {
  PlanBuilder plan(imagenet_image);
  plan.convolution(32, 3, 2, 1, 1, false).batch_norm().relu(relu6_ceiling);
  int channels = 32;
  struct Stage {
    int expansion, output_channels, blocks, stride;
  };
  for (const Stage& stage :
       {Stage{1, 16, 1, 1}, Stage{6, 24, 2, 2}, Stage{6, 32, 3, 2}, Stage{6, 64, 4, 2},
        Stage{6, 96, 3, 1}, Stage{6, 160, 3, 2}, Stage{6, 320, 1, 1}})
    for (int block = 0; block < stage.blocks; ++block) {
      const int stride = block == 0 ? stage.stride : 1;
      const int hidden = channels * stage.expansion;
      const auto inverted_residual = [&](PlanBuilder& path) {
        if (stage.expansion != 1)
          path.convolution(hidden, 1, 1, 0, 1, false).batch_norm().relu(relu6_ceiling);
        path.convolution(hidden, 3, stride, 1, hidden, false).batch_norm().relu(relu6_ceiling);
        path.convolution(stage.output_channels, 1, 1, 0, 1, false).batch_norm();
      };
      if (stride == 1 && channels == stage.output_channels)
        plan.residual(inverted_residual, nullptr, false);
      else
        inverted_residual(plan);
      channels = stage.output_channels;
    }
  plan.convolution(1280, 1, 1, 0, 1, false).batch_norm().relu(relu6_ceiling);
  plan.global_average_pool().dense(1000);
  return plan;
}

}  // namespace

std::vector<std::unique_ptr<Workload>> convolutional_workloads() {
  std::vector<std::unique_ptr<Workload>> all;
  all.push_back(std::make_unique<CnnWorkload>(
      "alexnet-r", "Cifar-10 net: 3 x (conv5x5, ReLU, 3x3/2 max pool), fc 576-10", cifar_image,
      alexnet_r(), 1024));
  all.push_back(std::make_unique<CnnWorkload>(
      "alexnet-s", "AlexNet: 5 conv (64@11x11/4 ... 256@3x3), 3 max pools, fc 9216-4096-4096-1000",
      imagenet_image, alexnet_s(), 16));
  all.push_back(std::make_unique<CnnWorkload>(
      "vgg-16", "13 conv3x3 (64-512) with 5 max pools, fc 25088-4096-4096-1000", imagenet_image,
      vgg_16(), 16));
  all.push_back(std::make_unique<CnnWorkload>(
      "resnet-56", "Cifar ResNet: 3 x 9 basic blocks (16/32/64), batch norm, global pool, fc 10",
      cifar_image, resnet_56(), 128));
  all.push_back(std::make_unique<CnnWorkload>(
      "resnet-50", "ResNet-50 v1: 3-4-6-3 bottleneck blocks, batch norm, global pool, fc 1000",
      imagenet_image, resnet_50(), 16));
  all.push_back(std::make_unique<CnnWorkload>(
      "mobilenet-v2",
      "MobileNet v2 x1.0: 17 inverted residual blocks, depthwise conv, ReLU6, fc 1000",
      imagenet_image, mobilenet_v2(), 16));
  return all;
}

}  // namespace dlscale::workloads
