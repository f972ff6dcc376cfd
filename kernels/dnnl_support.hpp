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
