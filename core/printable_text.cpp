// A small UTF-8 decoder: each code point is kept or escaped; a byte that does not start a valid
// sequence is escaped on its own.
#include "core/printable_text.hpp"

#include <cstdint>
#include <utility>

#include <fmt/format.h>

namespace dlscale {

namespace {

bool unprintable(char32_t c) {
  return c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) || c == 0x200e || c == 0x200f ||
         (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

// The code point at text[at] and its length in bytes, or length 0 where the bytes there are not
// UTF-8 (a stray continuation byte, a truncated or overlong sequence, a surrogate).
std::pair<char32_t, std::size_t> decode(std::string_view text, std::size_t at) {
  const auto lead = std::uint8_t(text[at]);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  if (lead >= 0xc2 && lead <= 0xdf)
    length = 2;
  else if (lead >= 0xe0 && lead <= 0xef)
    length = 3;
  else if (lead >= 0xf0 && lead <= 0xf4)
    length = 4;
  if (length == 0 || at + length > text.size()) return {0, 0};
  char32_t c = lead & (0x7f >> length);
  for (std::size_t k = 1; k < length; ++k) {
    const auto next = std::uint8_t(text[at + k]);
    if ((next & 0xc0) != 0x80) return {0, 0};
    c = (c << 6) | (next & 0x3f);
  }
  const char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < smallest[length] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return {0, 0};
  return {c, length};
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto [c, length] = decode(text, at);
    if (length == 0) {
      out += fmt::format("\\x{:02x}", std::uint8_t(text[at]));
      ++at;
      continue;
    }
    if (!unprintable(c))
      out.append(text.substr(at, length));
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x100)
      out += fmt::format("\\x{:02x}", std::uint32_t(c));
    else
      out += fmt::format("\\u{:04x}", std::uint32_t(c));
    at += length;
  }
  return out;
}

}  // namespace dlscale
