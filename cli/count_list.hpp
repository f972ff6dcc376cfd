// Comma-separated lists, as the sweep options take them: counts for --ranks 1,2,4 and
// --threads 1,2,4,8 (and the step benchmark's --threads), names for --precision fp32,bf16.
#pragma once

#include <string_view>
#include <vector>

namespace dlscale::cli {

// The fields of `text` between commas, in order, empty ones included ("a,,b" has three).
std::vector<std::string_view> split_list(std::string_view text);

// The counts in `text`, ascending and without repeats. Throws UserError naming `option` for an
// empty list or an entry that is not a whole number in 1..`largest`.
std::vector<int> parse_count_list(std::string_view text, std::string_view option, int largest,
                                  std::string_view what);

}  // namespace dlscale::cli
