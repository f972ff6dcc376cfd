// The phases of a training step. These names are the single spelling used everywhere: terminal
// summary, HDF5 attributes, CSV columns and plots.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace dlscale {

enum class Phase : std::size_t { forward, backward, allreduce, update, step };

inline constexpr std::size_t phase_count = 5;

inline constexpr std::array<std::string_view, phase_count> phase_names = {
    "forward", "backward", "allreduce", "update", "step"};

constexpr std::size_t index_of(Phase phase) { return static_cast<std::size_t>(phase); }
constexpr std::string_view name_of(Phase phase) { return phase_names[index_of(phase)]; }

}  // namespace dlscale
