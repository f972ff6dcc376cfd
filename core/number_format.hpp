// Large counts printed the way the reference tables print them: 14,205,962.
#pragma once

#include <cstdint>
#include <string>

namespace dlscale {

inline std::string with_thousands_separators(std::uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

}  // namespace dlscale
