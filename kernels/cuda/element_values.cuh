// Tensor elements read as float and written from float, whatever their type (float or bf16), in
// device code: what lets one kernel serve both float images and the bf16 images of
// DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16 (cuda_context.hpp). bf16 is written rounded to the nearest
// value, ties to even, as round_to_bf16 rounds; reading bf16 is exact. nvcc only.
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

namespace dlscale::kernels {

__device__ inline float load_float(float value) { return value; }
__device__ inline float load_float(__nv_bfloat16 value) { return __bfloat162float(value); }

template <typename T>
__device__ inline T store_float(float value) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(value);
  else
    return value;
}

// A network buffer (float-typed, as the Device seam passes every tensor) read as the bf16 images
// it holds where the device keeps them in bf16.
template <typename T>
inline const __nv_bfloat16* as_bf16(const T* values) {
  return reinterpret_cast<const __nv_bfloat16*>(values);
}
template <typename T>
inline __nv_bfloat16* as_bf16(T* values) {
  return reinterpret_cast<__nv_bfloat16*>(values);
}

}  // namespace dlscale::kernels
