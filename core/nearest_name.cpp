// Edit distance with transpositions (optimal string alignment), as spelling suggestions use it.
#include "core/nearest_name.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dlscale {

namespace {

// Insertions, deletions, substitutions and swaps of adjacent letters turning a into b.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::size_t common_start(std::string_view a, std::string_view b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

std::optional<std::string> nearest_name(std::string_view typed,
                                        const std::vector<std::string>& known) {
  // Names longer than any real one are not worth the quadratic distance.
  constexpr std::size_t longest_compared = 64;
  if (typed.empty() || typed.size() > longest_compared) return std::nullopt;
  const auto letters = [](std::string_view name) {
    return name.substr(std::min(name.find_first_not_of('-'), name.size()));
  };
  const std::string_view word = letters(typed);
  std::optional<std::string> best;
  std::size_t best_score = SIZE_MAX;
  for (const auto& name : known) {
    const std::string_view candidate = letters(name);
    if (candidate.empty() || candidate.size() > longest_compared) continue;
    const std::size_t distance = edit_distance(word, candidate);
    const std::size_t shorter = std::min(word.size(), candidate.size());
    const bool few_edits = distance <= std::max<std::size_t>(1, shorter / 3);
    // "iterations" for "iters", "output" for "out": the same word, written out.
    const std::size_t shared = common_start(word, candidate);
    const bool same_start =
        (shared >= 4 && 2 * shared >= shorter + 1) || (shared >= 3 && shared == shorter);
    if (!few_edits && !same_start) continue;
    const std::size_t score = few_edits ? distance : 100 + distance;
    if (score < best_score) {
      best_score = score;
      best = name;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known) {
  const auto name = nearest_name(typed, known);
  return name ? fmt::format(" (did you mean '{}'?)", *name) : std::string();
}

}  // namespace dlscale
