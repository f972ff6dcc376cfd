// The one place that knows every workload: the built-in presets and the user-defined specs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "workloads/workload.hpp"

namespace dlscale::workloads {

// The built-in workloads, in the order --list-models shows them.
std::vector<std::unique_ptr<Workload>> builtin_workloads();

// A built-in name ("fcn-r") or a spec ("fcn:784,2048,10"). Throws UserError otherwise.
std::unique_ptr<Workload> make_workload(const std::string& name_or_spec);

}  // namespace dlscale::workloads
