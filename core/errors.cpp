// Formats library-call failures the same way for every library.
#include "core/errors.hpp"

#include <fmt/format.h>

namespace dlscale {

LibraryError::LibraryError(std::string_view library, std::string_view call, std::string_view file,
                           int line, std::string_view message)
    : std::runtime_error(
          fmt::format("{} call failed at {}:{}: {}: {}", library, file, line, call, message)) {}

}  // namespace dlscale
