// A square GEMM, warmed up once and then timed over and over for a minimum wall time; the best
// rate is the device's.
#include "worker/gemm_rate.hpp"

#include <algorithm>
#include <vector>

#include "core/run_clock.hpp"
#include "kernels/device_array.hpp"

namespace dlscale::worker {

double measure_gemm_gflops(kernels::Device& device, int order, double least_seconds) {
  constexpr int least_repeats = 3;  // a best of one is no best
  const std::size_t count = std::size_t(order) * order;
  std::vector<float> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = float(int(i % 17) - 8) / 8.0f;
  kernels::DeviceArray<float> a(device, count), b(device, count), c(device, count);
  a.copy_from_host(host);
  b.copy_from_host(host);
  auto& math = device.math_float();
  const auto multiply = [&] {
    math.gemm(kernels::Transpose::no, kernels::Transpose::no, order, order, order, 1.0f, a.data(),
              order, b.data(), order, 0.0f, c.data(), order);
  };
  multiply();  // loads the kernels and chooses the algorithm; not timed
  const auto start = device.make_event(), end = device.make_event();
  const RunClock clock;
  double best_seconds = 0;
  for (int repeat = 0; repeat < least_repeats || clock.seconds() < least_seconds; ++repeat) {
    device.record(*start);
    multiply();
    device.record(*end);
    const double seconds = device.elapsed_seconds(*start, *end);
    best_seconds = repeat == 0 ? seconds : std::min(best_seconds, seconds);
  }
  return 2.0 * double(order) * order * order / best_seconds / 1e9;
}

}  // namespace dlscale::worker
