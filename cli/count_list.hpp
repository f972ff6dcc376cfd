// Comma-separated lists of positive counts, as the sweep options take them: --ranks 1,2,4,
// --threads 1,2,4,8 (and the step benchmark's --threads).
#pragma once

#include <string_view>
#include <vector>

namespace dlscale::cli {

// The counts in `text`, ascending and without repeats. Throws UserError naming `option` for an
// empty list or an entry that is not a whole number in 1..`largest`.
std::vector<int> parse_count_list(std::string_view text, std::string_view option, int largest,
                                  std::string_view what);

}  // namespace dlscale::cli
