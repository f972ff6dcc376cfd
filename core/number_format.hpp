// Numbers printed for people: counts as the reference tables print them (14,205,962), bytes in
// binary units.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

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

// Bytes in binary units with one decimal: "512.0 MiB", "93.4 GiB".
inline std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

// The unit for times up to `longest_seconds`: the largest of s, ms, us and ns that it is at least
// one of, so a row reads 12.345 ms, not 0.012 s, and 330.000 ns, not 0.000 ms (the report's
// time_unit, report/dlscale_results.py). Seconds where there is no time to go by (0, NaN).
struct TimeUnit {
  const char* name;
  double per_second;
};

inline TimeUnit time_unit(double longest_seconds) {
  for (const TimeUnit unit : {TimeUnit{"s", 1}, TimeUnit{"ms", 1e3}, TimeUnit{"us", 1e6}})
    if (longest_seconds * unit.per_second >= 1) return unit;
  return longest_seconds > 0 ? TimeUnit{"ns", 1e9} : TimeUnit{"s", 1};
}

}  // namespace dlscale
