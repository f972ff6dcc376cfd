#include "printers/json_text.hpp"

#include <cmath>

#include <fmt/format.h>

namespace dlscale::printers {

std::string json_number(double value) {
  return std::isfinite(value) ? fmt::format("{:.9g}", value) : "null";
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", int(c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace dlscale::printers
