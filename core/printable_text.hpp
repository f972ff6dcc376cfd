// Text that came from a file or another program, made safe to print on one terminal line.
#pragma once

#include <string>
#include <string_view>

namespace dlscale {

// `text` with control characters (C0, DEL, C1), bidirectional-text controls and bytes that are
// not UTF-8 written as escapes (\n, \x1b, \u202e), as Python's repr writes them, so that a name
// read from a damaged or hostile file cannot move the cursor, recolour the terminal, reorder the
// line or break it in two. Printable UTF-8 (such as 名前) is kept as it is.
std::string printable(std::string_view text);

}  // namespace dlscale
