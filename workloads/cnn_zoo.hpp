// The convolutional networks of docs/workloads.md, layer by layer.
#pragma once

#include <memory>
#include <vector>

#include "workloads/workload.hpp"

namespace dlscale::workloads {

// alexnet-r, alexnet-s, vgg-16, resnet-56, resnet-50, mobilenet-v2, in that order.
std::vector<std::unique_ptr<Workload>> convolutional_workloads();

}  // namespace dlscale::workloads
