// The CUDA device's MathOps: cuBLAS GEMMs (row-major, by swapping the operands of column-major
// calls) and hand-written kernels for the rest, all queued on the context's stream. Every reduction
// adds in a fixed order and no kernel uses float atomics, so repeated runs are bit-identical.
// Under --precision bf16 a float GEMM reads bf16 copies of A and B (rounded here) and accumulates
// and writes float C; the rounding kernels also serve the convolutions and NCCL's bf16 sums.
#include "kernels/cuda/cuda_math.hpp"

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cuda/std/limits>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/channel_kernels.hpp"
#include "kernels/cuda/cublaslt_bias_gemm.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/element_values.cuh"

namespace dlscale::kernels {

namespace {

constexpr int elementwise_threads = 256;
constexpr int max_threads_per_multiprocessor = 2048;  // sm_70 to sm_90
constexpr int warp_size = 32;
constexpr std::size_t scratch_alignment = 256;

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// ---------------------------------------------------------------------------------------------
// Device helpers

__device__ std::size_t thread_index() { return std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ std::size_t grid_stride() { return std::size_t(gridDim.x) * blockDim.x; }

// A grid-stride walk over a matrix with `cols` columns that keeps i = row * cols + col without a
// 64-bit division at every step.
struct MatrixWalk {
  std::size_t i, row, col;
  std::size_t cols, stride, row_step, col_step;

  __device__ explicit MatrixWalk(std::size_t columns)
      : i(thread_index()),
        row(i / columns),
        col(i % columns),
        cols(columns),
        stride(grid_stride()),
        row_step(stride / columns),
        col_step(stride % columns) {}
  __device__ void next() {
    i += stride;
    row += row_step;
    col += col_step;
    if (col >= cols) {
      col -= cols;
      ++row;
    }
  }
};

// This thread's grid-stride indices i < count, `batch` at a time: load(i) for each index of a
// batch, then apply(i, loaded) for each. A thread thus keeps `batch` reads in flight where a plain
// grid-stride loop keeps one (a GPU's memory wants about three times what one read per thread of
// a full GPU holds: for_each_in_row); an element-wise kernel's results do not depend on it.
// load and apply may touch the same memory (an in-place add): each index is loaded before it is
// stored, and no two indices of a thread are the same.
template <int batch, typename Load, typename Apply>
__device__ void grid_stride_in_batches(std::size_t count, Load&& load, Apply&& apply) {
  const std::size_t stride = grid_stride();
  std::size_t i = thread_index();
  for (; i + (batch - 1) * stride < count; i += batch * stride) {
    decltype(load(i)) loaded[batch];
#pragma unroll
    for (int k = 0; k < batch; ++k) loaded[k] = load(i + k * stride);
#pragma unroll
    for (int k = 0; k < batch; ++k) apply(i + k * stride, loaded[k]);
  }
  for (; i < count; i += stride) apply(i, load(i));
}

// Two values loaded together (grid_stride_in_batches).
template <typename T>
struct LoadedPair {
  T first, second;
};

// a * b rounded on its own, never fused with a following add (the CPU rounds it the same way).
__device__ float rounded_product(float a, float b) { return __fmul_rn(a, b); }
__device__ double rounded_product(double a, double b) { return __dmul_rn(a, b); }

__device__ float exponential(float x) { return expf(x); }
__device__ double exponential(double x) { return exp(x); }

struct Sum {
  template <typename U>
  __device__ U operator()(U a, U b) const {
    return a + b;
  }
};
struct Maximum {
  template <typename U>
  __device__ U operator()(U a, U b) const {
    return a < b ? b : a;
  }
};

// Reduces one value per thread over the block in a fixed order (a butterfly inside each warp, then
// warp 0 over the warps' results) and gives every thread the result. blockDim.x: a multiple of 32.
template <typename U, typename Op>
__device__ U block_reduce(U value, Op op, U identity) {
  __shared__ U slots[warp_size + 1];  // one per warp, and the result
  const unsigned lane = threadIdx.x % warp_size;
  const unsigned warp = threadIdx.x / warp_size;
  for (int offset = warp_size / 2; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < blockDim.x / warp_size ? slots[lane] : identity;
    for (int offset = warp_size / 2; offset > 0; offset /= 2)
      value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
    if (lane == 0) slots[warp_size] = value;
  }
  __syncthreads();
  return slots[warp_size];
}

// 16 bytes of T, moved by one vector load or store.
template <typename T>
struct alignas(16) Packed {
  static constexpr int size = 16 / sizeof(T);
  T values[size];
};

// ---------------------------------------------------------------------------------------------
// Kernels

// y[r][c] += bias[c]. `batch`: each thread's reads in flight, as grid_stride_in_batches (the walk
// keeps the columns).
template <typename T, int batch>
__global__ void add_row_bias_kernel(std::size_t count, std::size_t cols, const T* bias, T* y) {
  MatrixWalk at(cols);
  while (at.i + (batch - 1) * at.stride < count) {
    std::size_t index[batch];
    T value[batch], term[batch];
#pragma unroll
    for (int k = 0; k < batch; ++k, at.next()) {
      index[k] = at.i;
      value[k] = y[at.i];
      term[k] = bias[at.col];
    }
#pragma unroll
    for (int k = 0; k < batch; ++k) y[index[k]] = value[k] + term[k];
  }
  for (; at.i < count; at.next()) y[at.i] += bias[at.col];
}

constexpr int column_tile = warp_size;  // columns per block: a warp reads 32 adjacent values
constexpr int row_lanes = 32;           // rows a block reads at once

// The tiled column sum of a row-major [rows x cols] matrix of terms, one block per tile of
// column_tile columns: lane y adds terms.at(r, c) for rows r = y, y + 32, ... in order, then the
// row_lanes lane sums are added in lane order and terms.store(c, total) writes each column's.
// A fixed order, so runs and replays repeat bit for bit. Sum is the accumulator (a value with +=).
template <typename Sum, typename Terms>
__device__ void sum_columns_in_tiles(std::size_t rows, std::size_t cols, const Terms& terms) {
  __shared__ Sum lane_sums[row_lanes][column_tile];
  for (std::size_t tile = std::size_t(blockIdx.x) * column_tile; tile < cols;
       tile += std::size_t(gridDim.x) * column_tile) {
    const std::size_t c = tile + threadIdx.x;
    Sum sum{};
    if (c < cols) {
#pragma unroll 4
      for (std::size_t r = threadIdx.y; r < rows; r += row_lanes) sum += terms.at(r, c);
    }
    lane_sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      Sum total = lane_sums[0][threadIdx.x];
      for (int lane = 1; lane < row_lanes; ++lane) total += lane_sums[lane][threadIdx.x];
      terms.store(c, total);
    }
    __syncthreads();
  }
}

// sums[c] = sum over r of dy[r][c], in T.
template <typename T>
struct ColumnOfDy {
  std::size_t cols;
  const T* dy;
  T* sums;
  __device__ T at(std::size_t r, std::size_t c) const { return dy[r * cols + c]; }
  __device__ void store(std::size_t c, T total) const { sums[c] = total; }
};

template <typename T>
__global__ void column_sums_kernel(std::size_t rows, std::size_t cols, const T* dy, T* sums) {
  sum_columns_in_tiles<T>(rows, cols, ColumnOfDy<T>{cols, dy, sums});
}

// y = min(max(x, 0), ceiling), with std::max / std::min's comparisons (NaN passes through).
template <typename T>
__global__ void relu_forward_kernel(std::size_t count, T ceiling, const T* x, T* y) {
  for (std::size_t i = thread_index(); i < count; i += grid_stride()) {
    const T positive = x[i] < T(0) ? T(0) : x[i];
    y[i] = ceiling < positive ? ceiling : positive;
  }
}

// dx = dy where 0 < y < ceiling, else 0
template <typename T>
__global__ void relu_backward_kernel(std::size_t count, T ceiling, const T* y, const T* dy, T* dx) {
  for (std::size_t i = thread_index(); i < count; i += grid_stride())
    dx[i] = y[i] > T(0) && y[i] < ceiling ? dy[i] : T(0);
}

// y = a + b (y may be a or b)
template <typename T, int batch>
__global__ void add_kernel(std::size_t count, const T* a, const T* b, T* y) {
  grid_stride_in_batches<batch>(
      count,
      [&](std::size_t i) {
        return LoadedPair<T>{a[i], b[i]};
      },
      [&](std::size_t i, LoadedPair<T> v) { y[i] = v.first + v.second; });
}

// The three above on bf16 images (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16), in float arithmetic,
// each result rounded once.
__global__ void bf16_relu_forward_kernel(std::size_t count, float ceiling, const __nv_bfloat16* x,
                                         __nv_bfloat16* y) {
  for (std::size_t i = thread_index(); i < count; i += grid_stride()) {
    const float value = load_float(x[i]);
    const float positive = value < 0.0f ? 0.0f : value;
    y[i] = store_float<__nv_bfloat16>(ceiling < positive ? ceiling : positive);
  }
}

__global__ void bf16_relu_backward_kernel(std::size_t count, float ceiling, const __nv_bfloat16* y,
                                          const __nv_bfloat16* dy, __nv_bfloat16* dx) {
  for (std::size_t i = thread_index(); i < count; i += grid_stride()) {
    const float output = load_float(y[i]);
    dx[i] = output > 0.0f && output < ceiling ? dy[i] : store_float<__nv_bfloat16>(0.0f);
  }
}

__global__ void bf16_add_kernel(std::size_t count, const __nv_bfloat16* a, const __nv_bfloat16* b,
                                __nv_bfloat16* y) {
  for (std::size_t i = thread_index(); i < count; i += grid_stride())
    y[i] = store_float<__nv_bfloat16>(load_float(a[i]) + load_float(b[i]));
}

// y = 1 / (1 + exp(-x))
template <typename T>
__global__ void sigmoid_forward_kernel(std::size_t count, const T* x, T* y) {
  for (std::size_t i = thread_index(); i < count; i += grid_stride())
    y[i] = T(1) / (T(1) + exponential(-x[i]));
}

// dx = dy * y * (1 - y)
template <typename T>
__global__ void sigmoid_backward_kernel(std::size_t count, const T* y, const T* dy, T* dx) {
  for (std::size_t i = thread_index(); i < count; i += grid_stride())
    dx[i] = dy[i] * y[i] * (T(1) - y[i]);
}

// y[r][c] = table[ids[r]][c]; NaN for a negative (or NaN) id, rather than a stray read
template <typename T>
__global__ void embedding_forward_kernel(std::size_t count, std::size_t width, const T* ids,
                                         const T* table, T* y) {
  for (MatrixWalk at(width); at.i < count; at.next()) {
    const T id = ids[at.row];
    y[at.i] = id >= T(0) ? table[std::size_t(id) * width + at.col]
                         : cuda::std::numeric_limits<T>::quiet_NaN();
  }
}

// keys[r] = ids[r] as an integer (vocabulary for an id outside [0, vocabulary)); rows[r] = r
template <typename T>
__global__ void embedding_sort_input_kernel(std::size_t rows, int vocabulary, const T* ids,
                                            unsigned* keys, int* row_numbers) {
  for (std::size_t r = thread_index(); r < rows; r += grid_stride()) {
    const T id = ids[r];
    keys[r] = id >= T(0) && id < T(vocabulary) ? unsigned(id) : unsigned(vocabulary);
    row_numbers[r] = int(r);
  }
}

// table_gradient[id][c] = sum of dy[r][c] over the rows r of token id, in increasing r (as the
// CPU adds them). The rows come sorted stably by id; the block at the start of each run of equal
// ids sums that run, blockIdx.y picking a tile of columns.
template <typename T>
__global__ void embedding_gradient_kernel(std::size_t rows, std::size_t width, unsigned vocabulary,
                                          const unsigned* sorted_ids, const int* sorted_rows,
                                          const T* dy, T* table_gradient, bool add_to_gradient) {
  for (std::size_t start = blockIdx.x; start < rows; start += gridDim.x) {
    const unsigned id = sorted_ids[start];
    if (id >= vocabulary || (start > 0 && sorted_ids[start - 1] == id)) continue;
    // The run's end: the first sorted position past start with a larger id (binary search).
    std::size_t low = start + 1, high = rows;
    while (low < high) {
      const std::size_t middle = low + (high - low) / 2;
      if (sorted_ids[middle] == id)
        low = middle + 1;
      else
        high = middle;
    }
    const std::size_t end = low;
    T* gradient = table_gradient + std::size_t(id) * width;
    for (std::size_t c = std::size_t(blockIdx.y) * blockDim.x + threadIdx.x; c < width;
         c += std::size_t(gridDim.y) * blockDim.x) {
      T sum = T(0);
#pragma unroll 8
      for (std::size_t j = start; j < end; ++j) sum += dy[std::size_t(sorted_rows[j]) * width + c];
      gradient[c] = add_to_gradient ? gradient[c] + sum : sum;
    }
  }
}

// Calls visit(c, row[c]) for this thread's columns of a row, c = threadIdx.x + k * blockDim.x in
// increasing k (the order of a plain block-strided loop, so a thread's sums come out bit for bit
// the same), reading `batch` of them before visiting any: a thread then keeps `batch` reads in
// flight where the plain loop keeps one and so leaves most of a GPU's memory bandwidth unused (a
// full H100 holds about 1 MB of single float reads in flight; its bandwidth wants about 3 MB).
template <int batch, typename T, typename Visit>
__device__ void for_each_in_row(const T* __restrict__ row, std::size_t count, Visit&& visit) {
  const std::size_t stride = blockDim.x;
  std::size_t c = threadIdx.x;
  for (; c + (batch - 1) * stride < count; c += batch * stride) {
    T values[batch];
#pragma unroll
    for (int k = 0; k < batch; ++k) values[k] = row[c + k * stride];
#pragma unroll
    for (int k = 0; k < batch; ++k) visit(c + k * stride, values[k]);
  }
  for (; c < count; c += stride) visit(c, row[c]);
}

// One block per row r: g = softmax(z) / rows, g[label] -= 1 / rows, and
// row_losses[r] = log(sum exp(z - max z)) - (z[label] - max z). Exponentials summed in double.
// `batch`: each thread's reads in flight (for_each_in_row); the results do not depend on it.
template <typename T, int batch>
__global__ void softmax_cross_entropy_kernel(std::size_t rows, std::size_t classes,
                                             const T* __restrict__ logits,
                                             const std::int32_t* labels, T* __restrict__ dlogits,
                                             double* row_losses) {
  const T inverse_rows = T(1) / T(rows);
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* z = logits + r * classes;
    T* g = dlogits + r * classes;
    T max_logit = -cuda::std::numeric_limits<T>::infinity();
    for_each_in_row<batch>(z, classes,
                           [&](std::size_t, T value) { max_logit = Maximum{}(max_logit, value); });
    max_logit = block_reduce(max_logit, Maximum{}, -cuda::std::numeric_limits<T>::infinity());
    double exp_sum = 0;
    for_each_in_row<batch>(z, classes, [&](std::size_t, T value) {
      exp_sum += double(exponential(value - max_logit));
    });
    exp_sum = block_reduce(exp_sum, Sum{}, 0.0);
    const T scale = rounded_product(T(1.0 / exp_sum), inverse_rows);
    const std::int32_t label = labels[r];
    for_each_in_row<batch>(z, classes, [&](std::size_t c, T value) {
      T gradient = rounded_product(exponential(value - max_logit), scale);
      if (c == std::size_t(label)) gradient -= inverse_rows;
      g[c] = gradient;
    });
    if (threadIdx.x == 0) {
      const bool known = label >= 0 && std::size_t(label) < classes;
      row_losses[r] = known ? log(exp_sum) - double(z[label] - max_logit)
                            : cuda::std::numeric_limits<double>::quiet_NaN();
    }
  }
}

// loss[0] = (sum of row_losses) / rows, by one block in a fixed order
template <typename T>
__global__ void mean_loss_kernel(std::size_t rows, const double* row_losses, T* loss) {
  double sum = 0;
  for (std::size_t r = threadIdx.x; r < rows; r += blockDim.x) sum += row_losses[r];
  sum = block_reduce(sum, Sum{}, 0.0);
  if (threadIdx.x == 0) loss[0] = T(sum / double(rows));
}

// Adds every thread's `value` of the block to *sum (device memory) where sum is not null: one
// atomic per block. Called by every thread of a block of elementwise_threads.
__device__ void add_block_total(double value, double* sum) {
  using BlockSum = cub::BlockReduce<double, elementwise_threads>;
  __shared__ typename BlockSum::TempStorage scratch;
  const double total = BlockSum(scratch).Sum(value);
  if (threadIdx.x == 0 && sum != nullptr) atomicAdd(sum, total);
}

// v = momentum * v + scale * g; p -= learning_rate * v. A NaN or infinite gradient raises the
// flag (a benign race: every writer writes 1). Returns (scale * g)^2 for the norm.
template <typename T>
__device__ double sgd_momentum_step(T learning_rate, T momentum, T gradient_scale, T gradient,
                                    T& velocity, T& parameter, std::int32_t* nonfinite_gradient) {
  if (!isfinite(gradient)) *nonfinite_gradient = 1;
  const T scaled = gradient_scale * gradient;
  velocity = momentum * velocity + scaled;
  parameter -= learning_rate * velocity;
  return double(scaled) * double(scaled);
}

// The SGD step on one element at a time (any alignment).
template <typename T>
__global__ void sgd_momentum_kernel(std::size_t count, T learning_rate, T momentum,
                                    T gradient_scale, const T* gradient, T* velocity, T* parameters,
                                    std::int32_t* nonfinite_gradient, double* squared_norm) {
  double sum = 0;
  for (std::size_t i = thread_index(); i < count; i += grid_stride())
    sum += sgd_momentum_step(learning_rate, momentum, gradient_scale, gradient[i], velocity[i],
                             parameters[i], nonfinite_gradient);
  add_block_total(sum, squared_norm);
}

// The SGD step on 16-byte packs: all three arrays 16-byte aligned, `packs` packs long.
template <typename T>
__global__ void sgd_momentum_packed_kernel(std::size_t packs, T learning_rate, T momentum,
                                           T gradient_scale, const Packed<T>* gradient,
                                           Packed<T>* velocity, Packed<T>* parameters,
                                           std::int32_t* nonfinite_gradient, double* squared_norm) {
  double sum = 0;
  for (std::size_t i = thread_index(); i < packs; i += grid_stride()) {
    const Packed<T> g = gradient[i];
    Packed<T> v = velocity[i];
    Packed<T> p = parameters[i];
#pragma unroll
    for (int j = 0; j < Packed<T>::size; ++j)
      sum += sgd_momentum_step(learning_rate, momentum, gradient_scale, g.values[j], v.values[j],
                               p.values[j], nonfinite_gradient);
    velocity[i] = v;
    parameters[i] = p;
  }
  add_block_total(sum, squared_norm);
}

// AdamW's step number lives in device memory so that a replayed graph counts its steps: one
// thread adds 1 before the update kernels, which read it.
__global__ void count_step_kernel(std::int64_t* step_count) { *step_count += 1; }

// The constants of AdamW's t-th step, made once per thread. The bias corrections 1 - beta^t are
// taken in double, as PyTorch takes them on the host, and rounded to T once.
template <typename T>
struct AdamWStep {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, epsilon;
  T decay_factor;           // 1 - learning_rate * weight_decay
  T step_size;              // learning_rate / (1 - beta1^t)
  T bias_correction2_sqrt;  // sqrt(1 - beta2^t)

  __device__ AdamWStep(T learning_rate, const AdamWHyperparameters<T>& hyperparameters,
                       std::int64_t t)
      : beta1(hyperparameters.beta1),
        one_minus_beta1(T(1) - hyperparameters.beta1),
        beta2(hyperparameters.beta2),
        one_minus_beta2(T(1) - hyperparameters.beta2),
        epsilon(hyperparameters.epsilon),
        decay_factor(T(1) - learning_rate * hyperparameters.weight_decay),
        step_size(T(double(learning_rate) / (1 - pow(double(hyperparameters.beta1), double(t))))),
        bias_correction2_sqrt(T(sqrt(1 - pow(double(hyperparameters.beta2), double(t))))) {}
};

// AdamW on one element: decoupled decay, the two moment averages, the bias-corrected step. A NaN
// or infinite gradient raises the flag, as in sgd_momentum_step. Returns (scale * g)^2.
template <typename T>
__device__ double adamw_step(const AdamWStep<T>& step, T gradient_scale, T gradient,
                             T& first_moment, T& second_moment, T& parameter,
                             std::int32_t* nonfinite_gradient) {
  if (!isfinite(gradient)) *nonfinite_gradient = 1;
  const T scaled = gradient_scale * gradient;
  first_moment = step.beta1 * first_moment + step.one_minus_beta1 * scaled;
  second_moment = step.beta2 * second_moment + step.one_minus_beta2 * scaled * scaled;
  const T denominator = sqrt(second_moment) / step.bias_correction2_sqrt + step.epsilon;
  parameter = parameter * step.decay_factor - step.step_size * first_moment / denominator;
  return double(scaled) * double(scaled);
}

// The AdamW step on one element at a time (any alignment), at step *step_count.
template <typename T>
__global__ void adamw_kernel(std::size_t count, T learning_rate,
                             AdamWHyperparameters<T> hyperparameters, T gradient_scale,
                             const T* gradient, T* first_moment, T* second_moment, T* parameters,
                             const std::int64_t* step_count, std::int32_t* nonfinite_gradient,
                             double* squared_norm) {
  const AdamWStep<T> step(learning_rate, hyperparameters, *step_count);
  double sum = 0;
  for (std::size_t i = thread_index(); i < count; i += grid_stride())
    sum += adamw_step(step, gradient_scale, gradient[i], first_moment[i], second_moment[i],
                      parameters[i], nonfinite_gradient);
  add_block_total(sum, squared_norm);
}

// The AdamW step on 16-byte packs: all four arrays 16-byte aligned, `packs` packs long.
template <typename T>
__global__ void adamw_packed_kernel(std::size_t packs, T learning_rate,
                                    AdamWHyperparameters<T> hyperparameters, T gradient_scale,
                                    const Packed<T>* gradient, Packed<T>* first_moment,
                                    Packed<T>* second_moment, Packed<T>* parameters,
                                    const std::int64_t* step_count,
                                    std::int32_t* nonfinite_gradient, double* squared_norm) {
  const AdamWStep<T> step(learning_rate, hyperparameters, *step_count);
  double sum = 0;
  for (std::size_t i = thread_index(); i < packs; i += grid_stride()) {
    const Packed<T> g = gradient[i];
    Packed<T> m = first_moment[i];
    Packed<T> v = second_moment[i];
    Packed<T> p = parameters[i];
#pragma unroll
    for (int j = 0; j < Packed<T>::size; ++j)
      sum += adamw_step(step, gradient_scale, g.values[j], m.values[j], v.values[j], p.values[j],
                        nonfinite_gradient);
    first_moment[i] = m;
    second_moment[i] = v;
    parameters[i] = p;
  }
  add_block_total(sum, squared_norm);
}

template <typename T>
__global__ void squared_norm_kernel(std::size_t count, const T* x, double* squared_norm) {
  double sum = 0;
  for (std::size_t i = thread_index(); i < count; i += grid_stride())
    sum += double(x[i]) * double(x[i]);
  add_block_total(sum, squared_norm);
}

template <int batch>
__global__ void round_to_bf16_kernel(std::size_t count, const float* from, __nv_bfloat16* to) {
  grid_stride_in_batches<batch>(
      count, [&](std::size_t i) { return from[i]; },
      [&](std::size_t i, float value) { to[i] = __float2bfloat16_rn(value); });
}

// to[row * to_stride + col] = from[row * cols + col] rounded: a row-major matrix copied into rows
// of `to_stride` values (the values between a row's end and the next row are not written).
// `batch`: each thread's reads in flight, as add_row_bias_kernel's walk.
template <int batch>
__global__ void round_rows_to_bf16_kernel(std::size_t count, std::size_t cols, const float* from,
                                          __nv_bfloat16* to, std::size_t to_stride) {
  MatrixWalk at(cols);
  while (at.i + (batch - 1) * at.stride < count) {
    std::size_t index[batch];
    float value[batch];
#pragma unroll
    for (int k = 0; k < batch; ++k, at.next()) {
      index[k] = at.row * to_stride + at.col;
      value[k] = from[at.i];
    }
#pragma unroll
    for (int k = 0; k < batch; ++k) to[index[k]] = __float2bfloat16_rn(value[k]);
  }
  for (; at.i < count; at.next()) to[at.row * to_stride + at.col] = __float2bfloat16_rn(from[at.i]);
}

template <int batch>
__global__ void widen_to_float_kernel(std::size_t count, const __nv_bfloat16* from, float* to) {
  grid_stride_in_batches<batch>(
      count, [&](std::size_t i) { return from[i]; },
      [&](std::size_t i, __nv_bfloat16 value) { to[i] = __bfloat162float(value); });
}

// ---------------------------------------------------------------------------------------------
// Host side

// Blocks for a conversion's grid-stride loop: enough to fill the largest GPUs (132 SMs of 2048
// threads) without asking which GPU this is.
constexpr std::size_t conversion_blocks = 1024;

unsigned conversion_grid(std::size_t count) {
  return unsigned(
      std::min((count + elementwise_threads - 1) / elementwise_threads, conversion_blocks));
}

// Elements from the first to the last of a row-major matrix of `rows` x `cols` with leading
// dimension `ld`: what a library reads of it.
std::size_t stored_count(int rows, int cols, int ld) {
  if (rows <= 0 || cols <= 0) return 0;
  return std::size_t(rows - 1) * std::size_t(ld) + std::size_t(cols);
}

cublasOperation_t to_cublas(Transpose transpose) {
  return transpose == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

bool aligned_16(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

// Bits that hold every integer from 0 to value.
// ---------------------------------------------------------------------------------------------
// Transformer kernels: plain first versions, one block per row, reductions in a fixed order.

constexpr double layer_norm_epsilon = 1e-5;  // torch.nn.LayerNorm's default
constexpr double gelu_sqrt_2_over_pi = 0.7978845608028654;
constexpr double gelu_cubic = 0.044715;

template <typename T>
__global__ void layer_norm_forward_kernel(std::size_t rows, std::size_t width, const T* x,
                                          const T* scale_shift, T* y, T* mean, T* variance) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * width;
    double sum = 0;
    for (std::size_t c = threadIdx.x; c < width; c += blockDim.x) sum += double(in[c]);
    const double row_mean = block_reduce(sum, Sum{}, 0.0) / double(width);
    double squares = 0;
    for (std::size_t c = threadIdx.x; c < width; c += blockDim.x)
      squares += (double(in[c]) - row_mean) * (double(in[c]) - row_mean);
    const double row_variance = block_reduce(squares, Sum{}, 0.0) / double(width);
    const double inverse_deviation = 1.0 / sqrt(row_variance + layer_norm_epsilon);
    for (std::size_t c = threadIdx.x; c < width; c += blockDim.x)
      y[r * width + c] = T((double(in[c]) - row_mean) * inverse_deviation) * scale_shift[c] +
                         scale_shift[width + c];
    if (threadIdx.x == 0) {
      mean[r] = T(row_mean);
      variance[r] = T(row_variance);
    }
  }
}

// One block per row: dx = (g - mean(g) - n * mean(g * n)) / deviation, g = dy * scale. Where
// inverse_deviations is not null, each row's 1 / deviation is also written there, for the tiled
// parameter gradient (which would otherwise take a double square root and division per element).
template <typename T>
__global__ void layer_norm_input_gradient_kernel(std::size_t rows, std::size_t width, const T* x,
                                                 const T* scale_shift, const T* mean,
                                                 const T* variance, const T* dy, T* dx,
                                                 double* inverse_deviations) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const double inverse_deviation = 1.0 / sqrt(double(variance[r]) + layer_norm_epsilon);
    if (inverse_deviations != nullptr && threadIdx.x == 0)
      inverse_deviations[r] = inverse_deviation;
    double gradient_sum = 0, gradient_dot_normalized = 0;
    for (std::size_t c = threadIdx.x; c < width; c += blockDim.x) {
      const double scaled = double(dy[r * width + c]) * double(scale_shift[c]);
      gradient_sum += scaled;
      gradient_dot_normalized +=
          scaled * (double(x[r * width + c]) - double(mean[r])) * inverse_deviation;
    }
    const double gradient_mean = block_reduce(gradient_sum, Sum{}, 0.0) / double(width);
    const double dot_mean = block_reduce(gradient_dot_normalized, Sum{}, 0.0) / double(width);
    for (std::size_t c = threadIdx.x; c < width; c += blockDim.x) {
      const double normalized = (double(x[r * width + c]) - double(mean[r])) * inverse_deviation;
      dx[r * width + c] = T((double(dy[r * width + c]) * double(scale_shift[c]) - gradient_mean -
                             normalized * dot_mean) *
                            inverse_deviation);
    }
  }
}

// One thread per column, summing the rows in order: dscale = sum dy * n, dshift = sum dy.
template <typename T>
__global__ void layer_norm_parameter_gradient_kernel(std::size_t rows, std::size_t width,
                                                     const T* x, const T* mean, const T* variance,
                                                     const T* dy, T* scale_shift_gradient) {
  for (std::size_t c = thread_index(); c < width; c += grid_stride()) {
    double scale_sum = 0, shift_sum = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const double inverse_deviation = 1.0 / sqrt(double(variance[r]) + layer_norm_epsilon);
      scale_sum += double(dy[r * width + c]) * (double(x[r * width + c]) - double(mean[r])) *
                   inverse_deviation;
      shift_sum += double(dy[r * width + c]);
    }
    scale_shift_gradient[c] = T(scale_sum);
    scale_shift_gradient[width + c] = T(shift_sum);
  }
}

// The same sums in the tiles of column sums (sum_columns_in_tiles): 32 times fewer sequential
// steps per thread, 32 times more threads (DLSCALE_CUDA_LAYER_NORM_GRADIENT=tiled).
struct ScaleShiftSums {
  double scale, shift;
  __device__ ScaleShiftSums& operator+=(const ScaleShiftSums& other) {
    scale += other.scale;
    shift += other.shift;
    return *this;
  }
};

// Each row's 1 / deviation comes from the input gradient's kernel (the same double, computed the
// same way, once per row instead of once per element).
template <typename T>
struct LayerNormParameterTerms {
  std::size_t width;
  const T *x, *mean;
  const double* inverse_deviations;
  const T* dy;
  T* scale_shift_gradient;
  __device__ ScaleShiftSums at(std::size_t r, std::size_t c) const {
    const double gradient = double(dy[r * width + c]);
    return {gradient * (double(x[r * width + c]) - double(mean[r])) * inverse_deviations[r],
            gradient};
  }
  __device__ void store(std::size_t c, const ScaleShiftSums& total) const {
    scale_shift_gradient[c] = T(total.scale);
    scale_shift_gradient[width + c] = T(total.shift);
  }
};

template <typename T>
__global__ void layer_norm_parameter_gradient_tiled_kernel(std::size_t rows, std::size_t width,
                                                           const T* x, const T* mean,
                                                           const double* inverse_deviations,
                                                           const T* dy, T* scale_shift_gradient) {
  sum_columns_in_tiles<ScaleShiftSums>(
      rows, width,
      LayerNormParameterTerms<T>{width, x, mean, inverse_deviations, dy, scale_shift_gradient});
}

template <typename T, int batch>
__global__ void gelu_forward_kernel(std::size_t count, const T* x, T* y) {
  grid_stride_in_batches<batch>(
      count, [&](std::size_t i) { return x[i]; },
      [&](std::size_t i, T value) {
        const T inner = T(gelu_sqrt_2_over_pi) * (value + T(gelu_cubic) * value * value * value);
        y[i] = T(0.5) * value * (T(1) + tanh(inner));
      });
}

template <typename T, int batch>
__global__ void gelu_backward_kernel(std::size_t count, const T* x, const T* dy, T* dx) {
  grid_stride_in_batches<batch>(
      count,
      [&](std::size_t i) {
        return LoadedPair<T>{x[i], dy[i]};
      },
      [&](std::size_t i, LoadedPair<T> v) {
        const T value = v.first;
        const T t = tanh(T(gelu_sqrt_2_over_pi) * (value + T(gelu_cubic) * value * value * value));
        const T derivative = T(0.5) * (T(1) + t) + T(0.5) * value * (T(1) - t * t) *
                                                       T(gelu_sqrt_2_over_pi) *
                                                       (T(1) + T(3 * gelu_cubic) * value * value);
        dx[i] = v.second * derivative;
      });
}

// One block per row r: softmax over columns 0..r, zeros after.
template <typename T>
__global__ void causal_softmax_forward_kernel(std::size_t heads, std::size_t rows, T* scores) {
  for (std::size_t row_index = blockIdx.x; row_index < heads * rows; row_index += gridDim.x) {
    const std::size_t r = row_index % rows;  // the row within its head
    T* row = scores + row_index * rows;
    T largest = -cuda::std::numeric_limits<T>::infinity();
    for (std::size_t c = threadIdx.x; c <= r; c += blockDim.x) largest = Maximum{}(largest, row[c]);
    largest = block_reduce(largest, Maximum{}, -cuda::std::numeric_limits<T>::infinity());
    double sum = 0;
    for (std::size_t c = threadIdx.x; c <= r; c += blockDim.x)
      sum += double(exponential(row[c] - largest));
    sum = block_reduce(sum, Sum{}, 0.0);
    for (std::size_t c = threadIdx.x; c < rows; c += blockDim.x)
      row[c] = c <= r ? T(double(exponential(row[c] - largest)) / sum) : T(0);
  }
}

// One block per row r: ds = p * (dp - sum of p * dp), zeros after column r.
template <typename T>
__global__ void causal_softmax_backward_kernel(std::size_t heads, std::size_t rows,
                                               const T* probabilities, T* gradient) {
  for (std::size_t row_index = blockIdx.x; row_index < heads * rows; row_index += gridDim.x) {
    const std::size_t r = row_index % rows;  // the row within its head
    const T* p = probabilities + row_index * rows;
    T* g = gradient + row_index * rows;
    double weighted = 0;
    for (std::size_t c = threadIdx.x; c <= r; c += blockDim.x) weighted += double(p[c] * g[c]);
    weighted = block_reduce(weighted, Sum{}, 0.0);
    for (std::size_t c = threadIdx.x; c < rows; c += blockDim.x)
      g[c] = c <= r ? T(double(p[c]) * (double(g[c]) - weighted)) : T(0);
  }
}

int bits_for(unsigned value) {
  int bits = 1;
  while (bits < 32 && (std::uint64_t(1) << bits) <= value) ++bits;
  return bits;
}

template <typename T>
class CudaMath final : public MathOps<T> {
 public:
  // Keeps a reference: the CudaDevice owns the context and outlives its math.
  explicit CudaMath(const CudaContext& context) : context_(context) {}
  ~CudaMath() override = default;
  CudaMath(const CudaMath&) = delete;
  CudaMath& operator=(const CudaMath&) = delete;

  void gemm(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, T alpha, const T* a,
            int lda, const T* b, int ldb, T beta, T* c, int ldc) override {
    // Row-major C = op(A) op(B) is, read column-major, C^T = op(B)^T op(A)^T: the same memory,
    // with the operands (and m, n) swapped. alpha and beta are host values.
    if constexpr (std::is_same_v<T, float>) {
      if (context_.precision == Precision::bf16) {
        gemm_bf16(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
      }
      const cublasComputeType_t compute =
          context_.precision == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      DLSCALE_CUBLAS_CHECK(cublasGemmEx(context_.cublas, to_cublas(transpose_b),
                                        to_cublas(transpose_a), n, m, k, &alpha, b, CUDA_R_32F, ldb,
                                        a, CUDA_R_32F, lda, &beta, c, CUDA_R_32F, ldc, compute,
                                        CUBLAS_GEMM_DEFAULT));
    } else {
      DLSCALE_CUBLAS_CHECK(cublasDgemm(context_.cublas, to_cublas(transpose_b),
                                       to_cublas(transpose_a), n, m, k, &alpha, b, ldb, a, lda,
                                       &beta, c, ldc));
    }
  }

  // With the bias epilogue (the default; off with DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=no), one
  // cuBLASLt matmul that adds the bias in its epilogue (on bf16 copies of x and W under bf16, as
  // gemm_bf16 reads them); else, and for a shape or alignment cuBLASLt offers nothing for, the
  // GEMM and then add_row_bias.
  void linear_forward(int rows, int inputs, int outputs, const T* x, const T* weights,
                      const T* bias, T* y) override {
    if constexpr (std::is_same_v<T, float>) {
      if (BiasGemm* fused = context_.bias_gemm; fused != nullptr && bias != nullptr) {
        if (context_.precision == Precision::bf16) {
          const std::size_t x_count = std::size_t(rows) * inputs;
          const std::size_t w_count = std::size_t(outputs) * inputs;
          const auto [x_bf16, w_bf16] =
              context_.bf16_staging->regions<2>({x_count, w_count}, context_.stream);
          if (fused->supports(rows, inputs, outputs, CUDA_R_16BF, CUBLAS_COMPUTE_32F, x_bf16,
                              w_bf16, bias, y)) {
            round_to_bf16(x, x_bf16, x_count, context_.stream, context_.batched_loads);
            round_to_bf16(weights, w_bf16, w_count, context_.stream, context_.batched_loads);
            fused->run(rows, inputs, outputs, CUDA_R_16BF, CUBLAS_COMPUTE_32F, x_bf16, w_bf16, bias,
                       y, context_.stream);
            return;
          }
        } else {
          const cublasComputeType_t compute = context_.precision == Precision::tf32
                                                  ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                  : CUBLAS_COMPUTE_32F;
          if (fused->supports(rows, inputs, outputs, CUDA_R_32F, compute, x, weights, bias, y)) {
            fused->run(rows, inputs, outputs, CUDA_R_32F, compute, x, weights, bias, y,
                       context_.stream);
            return;
          }
        }
      }
    }
    MathOps<T>::linear_forward(rows, inputs, outputs, x, weights, bias, y);
  }

  void gemm_strided_batched(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                            T alpha, const T* a, int lda, std::ptrdiff_t stride_a, const T* b,
                            int ldb, std::ptrdiff_t stride_b, T beta, T* c, int ldc,
                            std::ptrdiff_t stride_c, int count) override {
    if (!context_.cublas_strided_batched || count <= 1 || m <= 0 || n <= 0) {
      MathOps<T>::gemm_strided_batched(transpose_a, transpose_b, m, n, k, alpha, a, lda, stride_a,
                                       b, ldb, stride_b, beta, c, ldc, stride_c, count);
      return;
    }
    // Row-major to column-major as in gemm(): the operands swap, and so do their strides.
    const auto stored = [](Transpose transpose, int rows, int cols, int ld) {
      return transpose == Transpose::no ? stored_count(rows, cols, ld)
                                        : stored_count(cols, rows, ld);
    };
    if constexpr (std::is_same_v<T, float>) {
      if (context_.precision == Precision::bf16) {
        // Each operand's whole strided span is rounded once; the strides stay as they were.
        const std::size_t a_count =
            std::size_t(stride_a) * (count - 1) + stored(transpose_a, m, k, lda);
        const std::size_t b_count =
            std::size_t(stride_b) * (count - 1) + stored(transpose_b, k, n, ldb);
        const auto [a_bf16, b_bf16] =
            context_.bf16_staging->regions<2>({a_count, b_count}, context_.stream);
        round_to_bf16(a, a_bf16, a_count, context_.stream, context_.batched_loads);
        round_to_bf16(b, b_bf16, b_count, context_.stream, context_.batched_loads);
        DLSCALE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            context_.cublas, to_cublas(transpose_b), to_cublas(transpose_a), n, m, k, &alpha,
            b_bf16, CUDA_R_16BF, ldb, stride_b, a_bf16, CUDA_R_16BF, lda, stride_a, &beta, c,
            CUDA_R_32F, ldc, stride_c, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
      }
      const cublasComputeType_t compute =
          context_.precision == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      DLSCALE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          context_.cublas, to_cublas(transpose_b), to_cublas(transpose_a), n, m, k, &alpha, b,
          CUDA_R_32F, ldb, stride_b, a, CUDA_R_32F, lda, stride_a, &beta, c, CUDA_R_32F, ldc,
          stride_c, count, compute, CUBLAS_GEMM_DEFAULT));
    } else {
      DLSCALE_CUBLAS_CHECK(cublasDgemmStridedBatched(
          context_.cublas, to_cublas(transpose_b), to_cublas(transpose_a), n, m, k, &alpha, b, ldb,
          stride_b, a, lda, stride_a, &beta, c, ldc, stride_c, count));
    }
  }

  // Under bf16, dy is rounded once for both GEMMs, and the bias gradient summed from its float
  // values in that same pass (prepare_output_gradient: a dense layer's dy is a [rows x outputs]
  // matrix as an NHWC gradient is [pixels x channels]), where gemm() would round dy for each GEMM
  // and column_sums read it a third time: for lstm-64's 10,000-word head at batch 1024 (65,536
  // rows), 10 GB of traffic a step down to 4. Other precisions make the default's calls.
  void linear_backward(int rows, int inputs, int outputs, const T* x, const T* weights,
                       const T* output_gradient, T* weight_gradient, T* bias_gradient,
                       T* input_gradient) override {
    if constexpr (std::is_same_v<T, float>) {
      if (context_.precision == Precision::bf16 && rows > 0 && inputs > 0 && outputs > 0) {
        // The bf16 copy of dy is what both GEMMs read most of: with rows padded to 8 values (16
        // bytes; DLSCALE_CUDA_PADDED_BF16_ROWS=yes, a layer without bias) cuBLAS can load them as
        // vectors where a width like GPT-2's 50,257 words leaves every row misaligned.
        const int dy_stride =
            context_.padded_bf16_rows && bias_gradient == nullptr ? (outputs + 7) / 8 * 8 : outputs;
        const std::size_t dy_count = std::size_t(rows) * dy_stride;
        const std::size_t x_count = std::size_t(rows) * inputs;
        const std::size_t w_count = input_gradient != nullptr ? std::size_t(outputs) * inputs : 0;
        const auto [dy_bf16, x_bf16, w_bf16] =
            context_.bf16_staging->regions<3>({dy_count, x_count, w_count}, context_.stream);
        if (bias_gradient != nullptr)
          prepare_output_gradient<float, __nv_bfloat16>(
              output_gradient, nullptr, dy_bf16, rows, outputs, bias_gradient,
              scratch(channel_sums_scratch_bytes(rows, outputs)), context_.stream);
        else if (dy_stride != outputs)
          round_rows_to_bf16(output_gradient, dy_bf16, rows, outputs, dy_stride);
        else
          round_to_bf16(output_gradient, dy_bf16, dy_count, context_.stream,
                        context_.batched_loads);
        round_to_bf16(x, x_bf16, x_count, context_.stream, context_.batched_loads);
        const float one = 1, zero = 0;
        // Column-major, as in gemm(): dW^T [inputs x outputs] = x^T dy, dx^T = W^T dy^T.
        DLSCALE_CUBLAS_CHECK(cublasGemmEx(
            context_.cublas, CUBLAS_OP_N, CUBLAS_OP_T, inputs, outputs, rows, &one, x_bf16,
            CUDA_R_16BF, inputs, dy_bf16, CUDA_R_16BF, dy_stride, &zero, weight_gradient,
            CUDA_R_32F, inputs, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        if (input_gradient == nullptr) return;
        round_to_bf16(weights, w_bf16, w_count, context_.stream, context_.batched_loads);
        DLSCALE_CUBLAS_CHECK(cublasGemmEx(context_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, inputs, rows,
                                          outputs, &one, w_bf16, CUDA_R_16BF, inputs, dy_bf16,
                                          CUDA_R_16BF, dy_stride, &zero, input_gradient, CUDA_R_32F,
                                          inputs, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
      }
    }
    MathOps<T>::linear_backward(rows, inputs, outputs, x, weights, output_gradient, weight_gradient,
                                bias_gradient, input_gradient);
  }

  void add_row_bias(int rows, int cols, const T* bias, T* y) override {
    const std::size_t count = std::size_t(rows) * std::size_t(cols);
    if (rows <= 0 || cols <= 0) return;
    const auto kernel =
        context_.batched_loads ? add_row_bias_kernel<T, 4> : add_row_bias_kernel<T, 1>;
    kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(count, std::size_t(cols),
                                                                         bias, y);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void column_sums(int rows, int cols, const T* dy, T* sums) override {
    if (cols <= 0) return;
    column_sums_kernel<<<column_tile_blocks(cols), dim3(column_tile, row_lanes), 0,
                         context_.stream>>>(std::size_t(std::max(rows, 0)), std::size_t(cols), dy,
                                            sums);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void relu_forward(std::size_t count, T ceiling, const T* x, T* y) override {
    if (count == 0) return;
    relu_forward_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(
        count, ceiling, x, y);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void relu_backward(std::size_t count, T ceiling, const T* y, const T* dy, T* dx) override {
    if (count == 0) return;
    relu_backward_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(
        count, ceiling, y, dy, dx);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void add(std::size_t count, const T* a, const T* b, T* y) override {
    if (count == 0) return;
    const auto kernel = context_.batched_loads ? add_kernel<T, 4> : add_kernel<T, 1>;
    kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(count, a, b, y);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  // Native images are bf16 where the context says so (cuda_context.hpp); else these are the
  // float ops above.
  void native_image_relu_forward(std::size_t count, T ceiling, const T* x, T* y) override {
    if (!native_images_in_bf16()) return relu_forward(count, ceiling, x, y);
    if (count == 0) return;
    bf16_relu_forward_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(
        count, float(ceiling), as_bf16(x), as_bf16(y));
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void native_image_relu_backward(std::size_t count, T ceiling, const T* y, const T* dy,
                                  T* dx) override {
    if (!native_images_in_bf16()) return relu_backward(count, ceiling, y, dy, dx);
    if (count == 0) return;
    bf16_relu_backward_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(
        count, float(ceiling), as_bf16(y), as_bf16(dy), as_bf16(dx));
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void native_image_add(std::size_t count, const T* a, const T* b, T* y) override {
    if (!native_images_in_bf16()) return add(count, a, b, y);
    if (count == 0) return;
    bf16_add_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(
        count, as_bf16(a), as_bf16(b), as_bf16(y));
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void sigmoid_forward(std::size_t count, const T* x, T* y) override {
    if (count == 0) return;
    sigmoid_forward_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(count, x,
                                                                                         y);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void sigmoid_backward(std::size_t count, const T* y, const T* dy, T* dx) override {
    if (count == 0) return;
    sigmoid_backward_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(count, y,
                                                                                          dy, dx);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void embedding_forward(int rows, int width, const T* ids, const T* table, T* y) override {
    if (rows <= 0 || width <= 0) return;
    const std::size_t count = std::size_t(rows) * std::size_t(width);
    // The interface gives no vocabulary here, so only negative ids can be caught.
    embedding_forward_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(
        count, std::size_t(width), ids, table, y);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  // Deterministic: the rows are sorted stably by id (CUB radix sort), then each run of equal ids
  // is summed by one block in row order, so the result is the CPU's, bit for bit.
  void embedding_backward(int rows, int width, int vocabulary, const T* ids, const T* dy,
                          T* table_gradient, bool add_to_gradient) override {
    if (width <= 0 || vocabulary <= 0) return;
    if (!add_to_gradient)
      DLSCALE_CUDA_CHECK(cudaMemsetAsync(table_gradient, 0,
                                         std::size_t(vocabulary) * std::size_t(width) * sizeof(T),
                                         context_.stream));
    if (rows <= 0) return;
    // Keys run from 0 to vocabulary (which marks an invalid id): sort only the bits they use.
    const int key_bits = bits_for(unsigned(vocabulary));
    std::size_t sort_bytes = 0;
    DLSCALE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, sort_bytes, static_cast<const unsigned*>(nullptr), static_cast<unsigned*>(nullptr),
        static_cast<const int*>(nullptr), static_cast<int*>(nullptr), rows, 0, key_bits,
        context_.stream));
    const std::size_t array_bytes =
        round_up(std::size_t(rows) * sizeof(unsigned), scratch_alignment);
    std::byte* base = scratch(4 * array_bytes + sort_bytes);
    auto* keys = reinterpret_cast<unsigned*>(base);
    auto* sorted_keys = reinterpret_cast<unsigned*>(base + array_bytes);
    auto* row_numbers = reinterpret_cast<int*>(base + 2 * array_bytes);
    auto* sorted_rows = reinterpret_cast<int*>(base + 3 * array_bytes);
    void* sort_storage = base + 4 * array_bytes;

    embedding_sort_input_kernel<<<grid_for(std::size_t(rows)), elementwise_threads, 0,
                                  context_.stream>>>(std::size_t(rows), vocabulary, ids, keys,
                                                     row_numbers);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
    DLSCALE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_storage, sort_bytes, keys, sorted_keys,
                                                       row_numbers, sorted_rows, rows, 0, key_bits,
                                                       context_.stream));
    constexpr int column_threads = 128;
    const int threads = std::min(column_threads, int(round_up(std::size_t(width), warp_size)));
    const auto column_blocks =
        unsigned(std::min<std::size_t>((std::size_t(width) + threads - 1) / threads, 65535));
    const auto run_blocks = unsigned(std::min<std::size_t>(
        std::size_t(rows),
        std::size_t(multiprocessors()) * (max_threads_per_multiprocessor / threads) * 4));
    embedding_gradient_kernel<<<dim3(run_blocks, column_blocks), threads, 0, context_.stream>>>(
        std::size_t(rows), std::size_t(width), unsigned(vocabulary), sorted_keys, sorted_rows, dy,
        table_gradient, add_to_gradient);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void layer_norm_forward(int rows, int width, const T* x, const T* scale_shift, T* y, T* mean,
                          T* variance) override {
    if (rows <= 0 || width <= 0) return;
    layer_norm_forward_kernel<<<row_blocks(rows), elementwise_threads, 0, context_.stream>>>(
        std::size_t(rows), std::size_t(width), x, scale_shift, y, mean, variance);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void layer_norm_backward(int rows, int width, const T* x, const T* scale_shift, const T* mean,
                           const T* variance, const T* dy, T* dx,
                           T* scale_shift_gradient) override {
    if (rows <= 0 || width <= 0) return;
    // The tiled gradient reads each row's 1 / deviation from the math scratch (the softmax loss's
    // per-row losses use it too, later in the stream, and are as large).
    double* inverse_deviations =
        context_.tiled_layer_norm_gradient
            ? reinterpret_cast<double*>(scratch(std::size_t(rows) * sizeof(double)))
            : nullptr;
    layer_norm_input_gradient_kernel<<<row_blocks(rows), elementwise_threads, 0, context_.stream>>>(
        std::size_t(rows), std::size_t(width), x, scale_shift, mean, variance, dy, dx,
        inverse_deviations);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
    if (context_.tiled_layer_norm_gradient) {
      layer_norm_parameter_gradient_tiled_kernel<<<
          column_tile_blocks(width), dim3(column_tile, row_lanes), 0, context_.stream>>>(
          std::size_t(rows), std::size_t(width), x, mean, inverse_deviations, dy,
          scale_shift_gradient);
    } else {
      layer_norm_parameter_gradient_kernel<<<grid_for(std::size_t(width)), elementwise_threads, 0,
                                             context_.stream>>>(
          std::size_t(rows), std::size_t(width), x, mean, variance, dy, scale_shift_gradient);
    }
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void gelu_forward(std::size_t count, const T* x, T* y) override {
    if (count == 0) return;
    const auto kernel =
        context_.batched_loads ? gelu_forward_kernel<T, 4> : gelu_forward_kernel<T, 1>;
    kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(count, x, y);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void gelu_backward(std::size_t count, const T* x, const T* dy, T* dx) override {
    if (count == 0) return;
    const auto kernel =
        context_.batched_loads ? gelu_backward_kernel<T, 4> : gelu_backward_kernel<T, 1>;
    kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(count, x, dy, dx);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void causal_softmax_forward(int heads, int rows, T* scores) override {
    if (heads <= 0 || rows <= 0) return;
    causal_softmax_forward_kernel<<<row_blocks(heads * rows), elementwise_threads, 0,
                                    context_.stream>>>(std::size_t(heads), std::size_t(rows),
                                                       scores);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void causal_softmax_backward(int heads, int rows, const T* probabilities, T* gradient) override {
    if (heads <= 0 || rows <= 0) return;
    causal_softmax_backward_kernel<<<row_blocks(heads * rows), elementwise_threads, 0,
                                     context_.stream>>>(std::size_t(heads), std::size_t(rows),
                                                        probabilities, gradient);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void softmax_cross_entropy(int rows, int classes, const T* logits, const std::int32_t* labels,
                             T* dlogits, T* loss) override {
    // rows == 0 still writes loss[0]: 0 / 0, NaN, as on the CPU.
    const std::size_t row_count = std::size_t(std::max(rows, 0));
    auto* row_losses =
        reinterpret_cast<double*>(scratch(std::max<std::size_t>(row_count, 1) * sizeof(double)));
    if (row_count > 0 && classes > 0) {
      int threads = warp_size;
      while (threads < classes && threads < 256) threads *= 2;
      const auto blocks = unsigned(std::min<std::size_t>(
          row_count, std::size_t(multiprocessors()) * (max_threads_per_multiprocessor / threads)));
      // Four reads in flight per thread where asked (DLSCALE_CUDA_BATCHED_LOADS=yes).
      const auto kernel = context_.batched_loads ? softmax_cross_entropy_kernel<T, 4>
                                                 : softmax_cross_entropy_kernel<T, 1>;
      kernel<<<blocks, threads, 0, context_.stream>>>(row_count, std::size_t(classes), logits,
                                                      labels, dlogits, row_losses);
      DLSCALE_CUDA_CHECK(cudaGetLastError());
    }
    mean_loss_kernel<<<1, 1024, 0, context_.stream>>>(row_count, row_losses, loss);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  void sgd_momentum_update(std::size_t count, T learning_rate, T momentum, T gradient_scale,
                           const T* gradient, T* velocity, T* parameters,
                           std::int32_t* nonfinite_gradient, double* squared_norm) override {
    // The kernels add their blocks' totals: zeroed first, in the stream (a capturable memset).
    if (squared_norm != nullptr)
      DLSCALE_CUDA_CHECK(cudaMemsetAsync(squared_norm, 0, sizeof(double), context_.stream));
    if (count == 0) return;
    std::size_t done = 0;
    if (aligned_16(gradient) && aligned_16(velocity) && aligned_16(parameters)) {
      const std::size_t packs = count / Packed<T>::size;
      if (packs > 0) {
        sgd_momentum_packed_kernel<<<grid_for(packs), elementwise_threads, 0, context_.stream>>>(
            packs, learning_rate, momentum, gradient_scale,
            reinterpret_cast<const Packed<T>*>(gradient), reinterpret_cast<Packed<T>*>(velocity),
            reinterpret_cast<Packed<T>*>(parameters), nonfinite_gradient, squared_norm);
        DLSCALE_CUDA_CHECK(cudaGetLastError());
      }
      done = packs * Packed<T>::size;
    }
    if (done < count) {
      sgd_momentum_kernel<<<grid_for(count - done), elementwise_threads, 0, context_.stream>>>(
          count - done, learning_rate, momentum, gradient_scale, gradient + done, velocity + done,
          parameters + done, nonfinite_gradient, squared_norm);
      DLSCALE_CUDA_CHECK(cudaGetLastError());
    }
  }

  void adamw_update(std::size_t count, T learning_rate,
                    const AdamWHyperparameters<T>& hyperparameters, T gradient_scale,
                    const T* gradient, T* first_moment, T* second_moment, T* parameters,
                    std::int64_t* step_count, std::int32_t* nonfinite_gradient,
                    double* squared_norm) override {
    if (squared_norm != nullptr)
      DLSCALE_CUDA_CHECK(cudaMemsetAsync(squared_norm, 0, sizeof(double), context_.stream));
    // Counted even for an empty buffer, as on the CPU: t is the number of calls.
    count_step_kernel<<<1, 1, 0, context_.stream>>>(step_count);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
    if (count == 0) return;
    std::size_t done = 0;
    if (aligned_16(gradient) && aligned_16(first_moment) && aligned_16(second_moment) &&
        aligned_16(parameters)) {
      const std::size_t packs = count / Packed<T>::size;
      if (packs > 0) {
        adamw_packed_kernel<<<grid_for(packs), elementwise_threads, 0, context_.stream>>>(
            packs, learning_rate, hyperparameters, gradient_scale,
            reinterpret_cast<const Packed<T>*>(gradient),
            reinterpret_cast<Packed<T>*>(first_moment), reinterpret_cast<Packed<T>*>(second_moment),
            reinterpret_cast<Packed<T>*>(parameters), step_count, nonfinite_gradient, squared_norm);
        DLSCALE_CUDA_CHECK(cudaGetLastError());
      }
      done = packs * Packed<T>::size;
    }
    if (done < count) {
      adamw_kernel<<<grid_for(count - done), elementwise_threads, 0, context_.stream>>>(
          count - done, learning_rate, hyperparameters, gradient_scale, gradient + done,
          first_moment + done, second_moment + done, parameters + done, step_count,
          nonfinite_gradient, squared_norm);
      DLSCALE_CUDA_CHECK(cudaGetLastError());
    }
  }

  void squared_norm(std::size_t count, const T* x, double* squared_norm) override {
    DLSCALE_CUDA_CHECK(cudaMemsetAsync(squared_norm, 0, sizeof(double), context_.stream));
    if (count == 0) return;
    squared_norm_kernel<<<grid_for(count), elementwise_threads, 0, context_.stream>>>(count, x,
                                                                                      squared_norm);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

 private:
  // Only float math runs a network's image layers.
  bool native_images_in_bf16() const {
    return std::is_same_v<T, float> && context_.native_is_bf16();
  }
  // PyTorch autocast's GEMM: A and B rounded to bf16, products summed in float (CUBLAS_COMPUTE_32F
  // on bf16 inputs runs on tensor cores), C read and written in float.
  void gemm_bf16(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
    const std::size_t a_count =
        transpose_a == Transpose::no ? stored_count(m, k, lda) : stored_count(k, m, lda);
    const std::size_t b_count =
        transpose_b == Transpose::no ? stored_count(k, n, ldb) : stored_count(n, k, ldb);
    const auto [a_bf16, b_bf16] =
        context_.bf16_staging->regions<2>({a_count, b_count}, context_.stream);
    round_to_bf16(a, a_bf16, a_count, context_.stream, context_.batched_loads);
    round_to_bf16(b, b_bf16, b_count, context_.stream, context_.batched_loads);
    DLSCALE_CUBLAS_CHECK(cublasGemmEx(context_.cublas, to_cublas(transpose_b),
                                      to_cublas(transpose_a), n, m, k, &alpha, b_bf16, CUDA_R_16BF,
                                      ldb, a_bf16, CUDA_R_16BF, lda, &beta, c, CUDA_R_32F, ldc,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  int multiprocessors() {
    if (multiprocessors_ == 0)
      DLSCALE_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount,
                                                context_.device));
    return multiprocessors_;
  }

  // Blocks for a grid-stride loop over `count` items: one full wave at most.
  unsigned grid_for(std::size_t count) {
    const std::size_t wave =
        std::size_t(multiprocessors()) * (max_threads_per_multiprocessor / elementwise_threads);
    return unsigned(std::min((count + elementwise_threads - 1) / elementwise_threads, wave));
  }

  // Blocks for a loop over tiles of column_tile columns, each block column_tile x row_lanes
  // threads: one block per tile, up to four waves.
  unsigned column_tile_blocks(int cols) {
    const std::size_t tiles = (std::size_t(cols) + column_tile - 1) / column_tile;
    const int resident = max_threads_per_multiprocessor / (column_tile * row_lanes);
    return unsigned(std::min<std::size_t>(tiles, std::size_t(multiprocessors()) * resident * 4));
  }

  // Blocks for a loop with one block per row: one full wave at most.
  unsigned row_blocks(int rows) {
    const std::size_t wave =
        std::size_t(multiprocessors()) * (max_threads_per_multiprocessor / elementwise_threads);
    return unsigned(std::min(std::size_t(rows), wave));
  }

  // A row-major [rows x cols] float matrix rounded into bf16 rows of `stride` values.
  void round_rows_to_bf16(const float* from, __nv_bfloat16* to, int rows, int cols, int stride) {
    const std::size_t count = std::size_t(rows) * std::size_t(cols);
    if (count == 0) return;
    const auto kernel =
        context_.batched_loads ? round_rows_to_bf16_kernel<4> : round_rows_to_bf16_kernel<1>;
    kernel<<<conversion_grid(count), elementwise_threads, 0, context_.stream>>>(
        count, std::size_t(cols), from, to, std::size_t(stride));
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  // Device memory for the softmax's row losses, the embedding's sort, the column sums of a bf16
  // linear backward and the layer norm's per-row values, grown on demand, never during a graph
  // capture (the first, eager, step reaches the largest size). What it outgrows is kept, as
  // Bf16Staging keeps it: a graph captured earlier may still point into it, and a later eager call
  // of a larger size (another batch, a held-out evaluation) must not free it under that graph.
  std::byte* scratch(std::size_t bytes) {
    if (!scratch_.empty() && bytes <= scratch_.back().size())
      return scratch_.back().as<std::byte>();
    require_not_capturing(context_.stream, "CUDA math scratch");
    scratch_.emplace_back(round_up(bytes, scratch_alignment));
    return scratch_.back().as<std::byte>();
  }

  const CudaContext& context_;
  int multiprocessors_ = 0;
  std::vector<DeviceBuffer> scratch_;  // the last one is in use
};

}  // namespace

void round_to_bf16(const float* from, __nv_bfloat16* to, std::size_t count, cudaStream_t stream,
                   bool batched_loads) {
  if (count == 0) return;
  const auto kernel = batched_loads ? round_to_bf16_kernel<4> : round_to_bf16_kernel<1>;
  kernel<<<conversion_grid(count), elementwise_threads, 0, stream>>>(count, from, to);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

void widen_to_float(const __nv_bfloat16* from, float* to, std::size_t count, cudaStream_t stream,
                    bool batched_loads) {
  if (count == 0) return;
  const auto kernel = batched_loads ? widen_to_float_kernel<4> : widen_to_float_kernel<1>;
  kernel<<<conversion_grid(count), elementwise_threads, 0, stream>>>(count, from, to);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

std::unique_ptr<MathOps<float>> make_cuda_math_float(const CudaContext& context) {
  return std::make_unique<CudaMath<float>>(context);
}

std::unique_ptr<MathOps<double>> make_cuda_math_double(const CudaContext& context) {
  return std::make_unique<CudaMath<double>>(context);
}

}  // namespace dlscale::kernels
