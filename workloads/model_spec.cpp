// Size lists of user-defined model specs.
#include "workloads/model_spec.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::workloads {

void throw_malformed_spec(std::string_view full_spec, std::string_view why,
                          std::string_view usage) {
  throw UserError(
      fmt::format("--model: malformed spec '{}': {} (expected {})", full_spec, why, usage));
}

std::vector<int> parse_spec_sizes(const std::string& sizes, std::string_view full_spec,
                                  std::string_view usage, int largest) {
  std::vector<int> values;
  std::size_t start = 0;
  while (start <= sizes.size()) {
    const std::size_t comma = std::min(sizes.find(',', start), sizes.size());
    const std::string_view field(sizes.data() + start, comma - start);
    int value = 0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (field.empty() || error != std::errc() || end != field.data() + field.size())
      throw_malformed_spec(full_spec, fmt::format("'{}' is not a whole number", field), usage);
    if (value < 1 || value > largest)
      throw_malformed_spec(full_spec, fmt::format("{} is outside 1..{}", value, largest), usage);
    values.push_back(value);
    start = comma + 1;
  }
  return values;
}

}  // namespace dlscale::workloads
