// dlopen of libdlscale_cuda.so from beside the executable (the build tree, and tests one folder
// below it) or from the installed lib/dlscale; DLSCALE_GPU_MODULE_FROM_BIN comes from CMake.
#include "kernels/gpu_module_loader.hpp"

#include <dlfcn.h>

#include <array>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::gpu_module {

namespace {

constexpr const char* module_name = "libdlscale_cuda.so";

struct GpuModule {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded
  const EntryPoints* entry_points = nullptr;
};

GpuModule load() {
  GpuModule module;
  if (!built()) {
    module.error = built_without_cuda;
    return module;
  }
  std::error_code error;
  const auto bin = std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
  const std::array<std::filesystem::path, 3> candidates = {
      bin / module_name, bin / ".." / module_name, bin / DLSCALE_GPU_MODULE_FROM_BIN / module_name};
  for (const auto& candidate : candidates) {
    if (!std::filesystem::exists(candidate, error)) continue;
    // RTLD_NOW: a missing CUDA library or symbol shows here, not in the middle of a run.
    module.handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (module.handle == nullptr) {
      module.error = ::dlerror();
      return module;
    }
    module.entry_points = static_cast<const EntryPoints*>(::dlsym(module.handle, symbol));
    if (module.entry_points == nullptr) {
      module.error =
          fmt::format("{} lacks dlscale's entry points; reinstall dlscale", candidate.string());
      module.handle = nullptr;
    }
    return module;
  }
  module.error =
      fmt::format("{} is neither beside {} nor in {}; reinstall dlscale", module_name, bin.string(),
                  (bin / DLSCALE_GPU_MODULE_FROM_BIN).lexically_normal().string());
  return module;
}

const GpuModule& loaded() {
  static const GpuModule module = load();
  return module;
}

}  // namespace

bool built() {
#ifdef DLSCALE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

const EntryPoints& entry_points(const char* option) {
  const GpuModule& module = loaded();
  if (module.handle == nullptr)
    throw UserError(
        fmt::format("{}: cannot load dlscale's CUDA support: {}", option, module.error));
  return *module.entry_points;
}

}  // namespace dlscale::gpu_module
