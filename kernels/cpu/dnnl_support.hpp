// Small pieces every oneDNN-backed kernel uses: wrapping a device pointer as a oneDNN memory, and
// keeping primitives per batch size (creating a primitive costs far more than running a small one).
#pragma once

#include <map>

#include <oneapi/dnnl/dnnl.hpp>

namespace dlscale::kernels {

// oneDNN's memory takes a non-const handle even for inputs it only reads.
inline dnnl::memory wrap(const dnnl::memory::desc& desc, const dnnl::engine& engine,
                         const float* data) {
  return dnnl::memory(desc, engine, const_cast<float*>(data));
}

// One tensor as a primitive wants it. When the primitive's chosen layout differs from the plain
// one dlscale keeps, the data goes through a staging buffer of the kernel's own and a reorder:
// source() before the primitive for what it reads, target() and finish() around it for what it
// writes. When the layouts agree, the user's memory is used directly.
class LayoutStage {
 public:
  LayoutStage() = default;
  explicit LayoutStage(const dnnl::memory::desc& wanted) : wanted_(wanted) {}

  dnnl::memory source(dnnl::memory user, const dnnl::engine& engine, const dnnl::stream& stream) {
    if (user.get_desc() == wanted_) return user;
    dnnl::memory& staged = staging(engine);
    dnnl::reorder(user, staged).execute(stream, user, staged);
    return staged;
  }
  dnnl::memory target(const dnnl::memory& user, const dnnl::engine& engine) {
    return user.get_desc() == wanted_ ? user : staging(engine);
  }
  void finish(dnnl::memory user, const dnnl::stream& stream) {
    if (user.get_desc() == wanted_) return;
    dnnl::reorder(staging_, user).execute(stream, staging_, user);
  }

 private:
  dnnl::memory& staging(const dnnl::engine& engine) {
    if (!staging_) staging_ = dnnl::memory(wanted_, engine);
    return staging_;
  }

  dnnl::memory::desc wanted_;
  dnnl::memory staging_;
};

template <typename Primitives>
class PrimitivesPerBatch {
 public:
  // The primitives for `batch`, made by build(batch) the first time.
  template <typename Build>
  Primitives& get(int batch, Build&& build) {
    auto found = by_batch_.find(batch);
    if (found == by_batch_.end()) found = by_batch_.emplace(batch, build(batch)).first;
    return found->second;
  }

 private:
  std::map<int, Primitives> by_batch_;
};

}  // namespace dlscale::kernels
