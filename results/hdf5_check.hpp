// The one checked-call idiom for HDF5, and owning handles for its identifiers. HDF5 reports
// failure as a negative return; DLSCALE_H5_CHECK turns that into a LibraryError carrying the
// innermost message of HDF5's error stack.
#pragma once

#include <hdf5.h>

#include <string_view>
#include <utility>

namespace dlscale::results {

// Silences HDF5's own error printing for this thread; our errors carry the message instead.
void silence_hdf5_error_printing();

// Returns `result` (herr_t, htri_t and hid_t all fit in hid_t) or throws LibraryError.
hid_t check_hdf5(hid_t result, std::string_view call, std::string_view file, int line);

// An hid_t closed with the right H5*close when it goes out of scope.
class Hdf5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Hdf5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Hdf5Handle() {
    if (id_ >= 0) closer_(id_);
  }
  Hdf5Handle(Hdf5Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(Hdf5Handle&&) = delete;

  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_;
  Closer closer_;
};

}  // namespace dlscale::results

#define DLSCALE_H5_CHECK(call) ::dlscale::results::check_hdf5((call), #call, __FILE__, __LINE__)
