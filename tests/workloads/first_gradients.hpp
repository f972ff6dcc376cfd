// A network's first-step parameter gradients on a device, from the seed every such test uses,
// optionally (image workloads) with the input batch moved by one float ulp per value (a
// perturbation of the size of the rounding any float computation makes): what tests hold one
// device's gradients to another's, or to the exact kernels', with.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/random.hpp"
#include "kernels/device_array.hpp"
#include "tests/workloads/layer_gradient_comparison.hpp"
#include "worker/device_dataset.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::testing {

struct FirstGradients {
  std::vector<float> values;
  std::vector<LayerParameters> layers;
};

// Moves every value `ulps` float ulps up or down, each value's direction drawn from `seed` and
// `stream`: a perturbation of the size of the rounding any float computation makes.
inline void move_by_ulps(std::vector<float>& values, int ulps, std::uint64_t seed,
                         std::uint64_t stream) {
  const CounterRandom random(seed, stream);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float toward = random.uniform(i) < 0.5 ? -INFINITY : INFINITY;
    for (int step = 0; step < ulps; ++step) values[i] = std::nextafter(values[i], toward);
  }
}

// With `ulp_seed`, every input value is moved one ulp up or down, the direction drawn from it.
inline FirstGradients first_gradients(kernels::Device& device, const std::string& model, int batch,
                                      std::optional<std::uint64_t> ulp_seed = {}) {
  const auto workload = workloads::make_workload(model);
  const worker::DeviceDataset data(device, *workload, batch, 1, 5, 0);
  auto network = workload->build_network(device, batch);
  network->initialize(5);
  const std::size_t input_count = std::size_t(batch) * network->layers().front()->input_size();
  std::vector<float> inputs(input_count);
  device.copy_to_host(inputs.data(), data.inputs(0), input_count * sizeof(float));
  if (ulp_seed) move_by_ulps(inputs, 1, *ulp_seed, 0);
  kernels::DeviceArray<float> moved(device, input_count);
  moved.copy_from_host(inputs);
  network->forward_loss(batch, moved.data(), data.labels(0));
  network->backward(batch, moved.data());
  FirstGradients result{std::vector<float>(network->gradients().size()), {}};
  device.copy_to_host(result.values.data(), network->gradients().data(),
                      result.values.size() * sizeof(float));
  for (const auto& layer : network->layers())
    result.layers.push_back({layer->kind(), layer->parameter_count()});
  return result;
}

}  // namespace dlscale::testing
