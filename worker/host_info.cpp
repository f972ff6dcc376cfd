// Host identification.
#include "worker/host_info.hpp"

#include <unistd.h>

#include <climits>

namespace dlscale::worker {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name) != 0) return "unknown-host";
  return name;
}

}  // namespace dlscale::worker
