// NCHW <-> NHWC copies with type conversion, for the graph-API convolutions
// (image_layout_conversion.hpp). A change of order is a transpose of each image's
// [channels x pixels] matrix, done in 32 x 32 tiles through shared memory so that reads and
// writes are both coalesced; where the orders agree it is an element-wise conversion or a copy.
#include "kernels/cuda/image_layout_conversion.hpp"

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/element_values.cuh"

namespace dlscale::kernels {

namespace {

constexpr int tile = 32;
constexpr int tile_rows_per_pass = 8;  // a 32 x 8 block copies a 32 x 32 tile in 4 passes

template <typename To, typename From>
__device__ To convert_value(From value) {
  if constexpr (std::is_same_v<From, To>)
    return value;
  else
    return store_float<To>(load_float(value));
}

// to[n][c][r] = from[n][r][c] for every matrix n of `batch`, each `rows` x `columns` in `from`.
template <typename From, typename To>
__global__ void transpose_matrices(const From* __restrict__ from, To* __restrict__ to, int batch,
                                   int rows, int columns) {
  __shared__ To staged[tile][tile + 1];  // +1: no shared-memory bank conflicts on the way out
  const int first_column = blockIdx.x * tile, first_row = blockIdx.y * tile;
  const std::size_t matrix = std::size_t(rows) * columns;
  for (int n = blockIdx.z; n < batch; n += gridDim.z) {
    const From* in = from + n * matrix;
    To* out = to + n * matrix;
    for (int r = threadIdx.y; r < tile; r += tile_rows_per_pass) {
      const int row = first_row + r, column = first_column + threadIdx.x;
      if (row < rows && column < columns)
        staged[r][threadIdx.x] = convert_value<To>(in[std::size_t(row) * columns + column]);
    }
    __syncthreads();
    for (int c = threadIdx.y; c < tile; c += tile_rows_per_pass) {
      const int column = first_column + c, row = first_row + threadIdx.x;
      if (row < rows && column < columns)
        out[std::size_t(column) * rows + row] = staged[threadIdx.x][c];
    }
    __syncthreads();
  }
}

}  // namespace

template <typename From, typename To>
void convert_images(const From* from, MemoryOrder from_order, To* to, MemoryOrder to_order,
                    const ImageBatchShape& shape, cudaStream_t stream) {
  const std::size_t count = shape.size();
  if (count == 0) return;
  if (from_order == to_order || orders_agree(shape)) {
    if constexpr (std::is_same_v<From, To>)
      DLSCALE_CUDA_CHECK(
          cudaMemcpyAsync(to, from, count * sizeof(To), cudaMemcpyDeviceToDevice, stream));
    else if constexpr (std::is_same_v<To, __nv_bfloat16>)
      round_to_bf16(from, to, count, stream);
    else
      widen_to_float(from, to, count, stream);
    return;
  }
  // NCHW -> NHWC transposes each image's [C x HW] matrix; NHWC -> NCHW its [HW x C] one.
  const int pixels = shape.height * shape.width;
  const int rows = from_order == MemoryOrder::nchw ? shape.channels : pixels;
  const int columns = from_order == MemoryOrder::nchw ? pixels : shape.channels;
  const dim3 block(tile, tile_rows_per_pass);
  const dim3 grid((columns + tile - 1) / tile, (rows + tile - 1) / tile,
                  std::min(shape.batch, 65535));
  transpose_matrices<From, To><<<grid, block, 0, stream>>>(from, to, shape.batch, rows, columns);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

template void convert_images<float, float>(const float*, MemoryOrder, float*, MemoryOrder,
                                           const ImageBatchShape&, cudaStream_t);
template void convert_images<float, __nv_bfloat16>(const float*, MemoryOrder, __nv_bfloat16*,
                                                   MemoryOrder, const ImageBatchShape&,
                                                   cudaStream_t);
template void convert_images<__nv_bfloat16, float>(const __nv_bfloat16*, MemoryOrder, float*,
                                                   MemoryOrder, const ImageBatchShape&,
                                                   cudaStream_t);

}  // namespace dlscale::kernels
