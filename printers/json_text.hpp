// JSON's spelling of a number and of a string, for the printers that write JSON for tools
// (`dlscale predict --json`, `dlscale schema --json`).
#pragma once

#include <string>

namespace dlscale::printers {

// NaN and infinities, which JSON lacks, become null.
std::string json_number(double value);
// Quoted, with quotes, backslashes and control characters escaped.
std::string json_string(const std::string& text);

}  // namespace dlscale::printers
