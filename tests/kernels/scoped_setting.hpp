// An environment variable set (or unset) for one scope and restored after it: how tests choose
// the settings that a device reads when it is made (DLSCALE_CUDNN_API and the like).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace dlscale::testing {

class ScopedSetting {
 public:
  // A null value unsets the variable for the scope.
  ScopedSetting(const char* name, const char* value) : name_(name) {
    if (const char* saved = std::getenv(name)) saved_ = saved;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedSetting() {
    if (saved_)
      setenv(name_.c_str(), saved_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

}  // namespace dlscale::testing
