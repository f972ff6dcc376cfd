// The comm backends a CPU test runs through: every registered backend that this build has, that
// serves the CPU and that sums a dtype. A new backend is tested by its record alone.
#pragma once

#include <vector>

#include "comm/communicator_factory.hpp"
#include "core/errors.hpp"

namespace dlscale::comm {

inline std::vector<const BackendRecord*> cpu_backends_summing(GradientDtype dtype) {
  const kernels::DeviceRecord& cpu = kernels::device_record(kernels::DeviceKind::cpu);
  std::vector<const BackendRecord*> backends;
  for (const BackendRecord& backend : backend_records()) {
    try {
      check_backend(backend, cpu, dtype);
    } catch (const UserError&) {
      continue;  // not built, not for host memory, or not for this dtype
    }
    backends.push_back(&backend);
  }
  return backends;
}

}  // namespace dlscale::comm
