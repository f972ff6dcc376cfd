#include "cli/count_list.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::cli {

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    fields.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return fields;
}

std::vector<int> parse_count_list(std::string_view text, std::string_view option, int largest,
                                  std::string_view what) {
  std::vector<int> counts;
  for (const std::string_view field : split_list(text)) {
    int value = 0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (field.empty() || error != std::errc() || end != field.data() + field.size() || value < 1 ||
        value > largest)
      throw UserError(fmt::format("{}: '{}' is not a {} in 1..{} (expected a list such as 1,2,4)",
                                  option, field, what, largest));
    counts.push_back(value);
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace dlscale::cli
