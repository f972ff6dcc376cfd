// Comma-separated lists, as the sweep options take them: counts for --ranks 1,2,4 and
// --threads 1,2,4,8 (and the step benchmark's --threads), names for --precision fp32,bf16 and
// `dlscale comm --collective` and --dtype.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::cli {

// The fields of `text` between commas, in order, empty ones included ("a,,b" has three).
std::vector<std::string_view> split_list(std::string_view text);

// The values that the names in `text` stand for, in the order given: `value_of(name)` for each,
// which throws UserError for a name that is none of the choices (naming them). A name given twice
// is refused naming `option`.
template <typename ValueOf>
auto parse_name_list(std::string_view text, std::string_view option, ValueOf value_of) {
  std::vector<decltype(value_of(std::string()))> values;
  for (const std::string_view field : split_list(text)) {
    const auto value = value_of(std::string(field));
    if (std::find(values.begin(), values.end(), value) != values.end())
      throw UserError(fmt::format("{} {}: {} is listed twice", option, text, field));
    values.push_back(value);
  }
  return values;
}

// The counts in `text`, ascending and without repeats. Throws UserError naming `option` for an
// empty list or an entry that is not a whole number in 1..`largest`.
std::vector<int> parse_count_list(std::string_view text, std::string_view option, int largest,
                                  std::string_view what);

}  // namespace dlscale::cli
