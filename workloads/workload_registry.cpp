// Built-in workloads, with the shapes and CPU batch sizes of ../shared/workloads.md.
#include "workloads/workload_registry.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "workloads/cnn_workload.hpp"
#include "workloads/fcn_workload.hpp"

namespace dlscale::workloads {

std::vector<std::unique_ptr<Workload>> builtin_workloads() {
  std::vector<std::unique_ptr<Workload>> all;
  all.push_back(std::make_unique<FcnWorkload>(
      "fcn-s", std::vector<int>{26752, 2048, 2048, 2048, 2048, 26752}, 64));
  all.push_back(
      std::make_unique<FcnWorkload>("fcn-r", std::vector<int>{784, 2048, 4096, 1024, 10}, 1024));
  // Cifar-10 net of the reference study: 32x32 -> 15 -> 7 -> 3 after the 3x3/2 poolings.
  all.push_back(std::make_unique<CnnWorkload>(
      "alexnet-r", "conv5x5/32, pool, conv5x5/32, pool, conv5x5/64, pool, fc10; ReLU",
      kernels::ImageShape{3, 32, 32},
      std::vector<CnnStep>{convolution(32, 5, 1, 2), relu(), max_pool(3, 2),
                           convolution(32, 5, 1, 2), relu(), max_pool(3, 2),
                           convolution(64, 5, 1, 2), relu(), max_pool(3, 2), dense(10)},
      1024));
  // AlexNet without LRN, dropout or batch norm (torchvision's layer sizes).
  all.push_back(std::make_unique<CnnWorkload>(
      "alexnet-s", "64@11x11/4, 192@5x5, 384@3x3, 256@3x3, 256@3x3, 3x3/2 max pools, fc 9216-4096-4096-1000",
      kernels::ImageShape{3, 224, 224},
      std::vector<CnnStep>{convolution(64, 11, 4, 2), relu(), max_pool(3, 2),
                           convolution(192, 5, 1, 2), relu(), max_pool(3, 2),
                           convolution(384, 3, 1, 1), relu(), convolution(256, 3, 1, 1), relu(),
                           convolution(256, 3, 1, 1), relu(), max_pool(3, 2),
                           dense(4096), relu(), dense(4096), relu(), dense(1000)},
      16));
  std::vector<CnnStep> vgg;
  for (const int channels : {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512,
                             512, 0}) {
    if (channels == 0) {
      vgg.push_back(max_pool(2, 2));
    } else {
      vgg.push_back(convolution(channels, 3, 1, 1));
      vgg.push_back(relu());
    }
  }
  for (const CnnStep& step : {dense(4096), relu(), dense(4096), relu(), dense(1000)})
    vgg.push_back(step);
  all.push_back(std::make_unique<CnnWorkload>(
      "vgg-16", "13 conv3x3 (64-512) with 2x2 max pools, fc 25088-4096-4096-1000",
      kernels::ImageShape{3, 224, 224}, std::move(vgg), 16));
  return all;
}

std::unique_ptr<Workload> make_workload(const std::string& name_or_spec) {
  constexpr std::string_view fcn_prefix = "fcn:";
  if (name_or_spec.starts_with(fcn_prefix))
    return parse_fcn_spec(name_or_spec.substr(fcn_prefix.size()));
  std::string known;
  for (auto& workload : builtin_workloads()) {
    if (workload->name() == name_or_spec) return std::move(workload);
    known += (known.empty() ? "" : ", ") + workload->name();
  }
  throw UserError(fmt::format(
      "--model: unknown model '{}' (built-in: {}; or fcn:INPUT,HIDDEN,...,CLASSES; see "
      "--list-models)",
      name_or_spec, known));
}

}  // namespace dlscale::workloads
