// "Did you mean ...?": the known name a mistyped one most likely meant, for the one-line errors
// about unknown models, options and config keys.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlscale {

// The name in `known` closest to `typed`: within a few edits (a dropped hyphen, a swapped or
// wrong letter: "resnet56", "--bacth"), or sharing a long start with it ("--iterations" for
// "--iters", "--output" for "--out"). Nothing when no name is that close.
std::optional<std::string> nearest_name(std::string_view typed,
                                        const std::vector<std::string>& known);

// " (did you mean 'NAME'?)" for the nearest name, or "" when there is none.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known);

}  // namespace dlscale
