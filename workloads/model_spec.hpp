// Parsing of user-defined model specs such as "fcn:784,2048,10" or "lstm:32,512,2,10000": a
// family prefix and a comma-separated list of sizes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlscale::workloads {

// Splits "784,2048,10" into sizes, each a whole number in 1..largest. Throws UserError
// "--model: malformed SPEC: WHY (expected USAGE)" naming the spec.
std::vector<int> parse_spec_sizes(const std::string& sizes, std::string_view full_spec,
                                  std::string_view usage, int largest);

// The same error, for checks the caller makes on the parsed sizes.
[[noreturn]] void throw_malformed_spec(std::string_view full_spec, std::string_view why,
                                       std::string_view usage);

}  // namespace dlscale::workloads
