// Compares two runs' flat gradient buffers layer by layer, for tests that hold one network to
// another (GPU against CPU, one activation layout against another): a failure names every layer
// that differs, last layer first, so the first one named is where the difference starts.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace dlscale::testing {

struct LayerParameters {
  std::string kind;
  std::size_t count = 0;
};

// Empty when every layer's largest difference is within `relative` of its largest gradient.
inline std::string layers_that_differ(const std::vector<float>& expected,
                                      const std::vector<float>& actual,
                                      const std::vector<LayerParameters>& layers, double relative) {
  std::vector<std::string> reports;
  std::size_t offset = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    double largest = 0, difference = 0;
    for (std::size_t j = offset; j < offset + layers[i].count; ++j) {
      largest = std::max(largest, std::abs(double(expected[j])));
      difference = std::max(difference, std::abs(double(expected[j]) - actual[j]));
    }
    if (difference > relative * largest + 1e-7)
      reports.push_back(fmt::format("layer {} ({}): largest difference {:.3g} of {:.3g}", i,
                                    layers[i].kind, difference, largest));
    offset += layers[i].count;
  }
  std::string text;
  for (auto report = reports.rbegin(); report != reports.rend(); ++report) text += "\n  " + *report;
  return text;
}

}  // namespace dlscale::testing
