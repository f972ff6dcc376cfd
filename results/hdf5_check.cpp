// Reads the most specific message off HDF5's error stack for LibraryError.
#include "results/hdf5_check.hpp"

#include <string>

#include "core/errors.hpp"

namespace dlscale::results {

namespace {

// Walking from the API call inwards: the first entry says what failed, the last says why.
struct ErrorStackEnds {
  std::string outermost;
  std::string innermost;
};

herr_t record_ends(unsigned position, const H5E_error2_t* error, void* ends_pointer) {
  auto& ends = *static_cast<ErrorStackEnds*>(ends_pointer);
  const std::string description = error->desc != nullptr ? error->desc : "";
  if (position == 0) ends.outermost = description;
  ends.innermost = description;
  return 0;
}

}  // namespace

void silence_hdf5_error_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

hid_t check_hdf5(hid_t result, std::string_view call, std::string_view file, int line) {
  if (result >= 0) return result;
  ErrorStackEnds ends;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, record_ends, &ends);
  H5Eclear2(H5E_DEFAULT);
  std::string message = ends.outermost.empty() ? "unknown HDF5 error" : ends.outermost;
  if (ends.innermost != ends.outermost) message += ": " + ends.innermost;
  throw LibraryError("HDF5", call, file, line, message);
}

}  // namespace dlscale::results
