// The names of a plain enum's values (precision, scaling mode, failure cause), both ways, in one
// table per enum. C++17, as the CUDA sources that include kernels/device.hpp are.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlscale {

// The names of an enum's values, in the enum's order, as options and results files spell them.
template <typename Enum, std::size_t count>
struct EnumNames {
  std::array<const char*, count> names;

  constexpr const char* operator()(Enum value) const { return names[std::size_t(value)]; }
  // Nothing for a name that is none of them.
  constexpr std::optional<Enum> named(std::string_view name) const {
    for (std::size_t i = 0; i < count; ++i)
      if (name == names[i]) return Enum(i);
    return std::nullopt;
  }
  std::vector<std::string> all() const { return {names.begin(), names.end()}; }
};

// The two answers of a yes-or-no setting (--probe, DLSCALE_NODE_EXCLUSIVE), false first.
inline constexpr EnumNames<bool, 2> yes_no_names{{"no", "yes"}};

}  // namespace dlscale
