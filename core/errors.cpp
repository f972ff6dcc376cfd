// Formats library-call failures the same way for every library.
#include "core/errors.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/printable_text.hpp"

namespace dlscale {

LibraryError::LibraryError(std::string_view library, std::string_view call, std::string_view file,
                           int line, std::string_view message)
    : std::runtime_error(
          fmt::format("{} call failed at {}:{}: {}: {}", library, file, line, call, message)),
      library_message_(message) {}

void require_choice(std::string_view option, std::string_view what, const std::string& value,
                    const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return;
  // printable: a value with a newline or an escape sequence still makes one line.
  throw UserError(fmt::format("{}: unknown {} '{}' (available: {})", option, what, printable(value),
                              fmt::join(choices, ", ")));
}

}  // namespace dlscale
