// Large counts printed the way the reference tables print them: 14,205,962.
#pragma once

#include <cstdint>
#include <string>

namespace dlscale {

inline std::string with_thousands_separators(std::uint64_t value) {
  std::string digits = std::to_string(value);
  for (int position = int(digits.size()) - 3; position > 0; position -= 3)
    digits.insert(std::size_t(position), ",");
  return digits;
}

}  // namespace dlscale
