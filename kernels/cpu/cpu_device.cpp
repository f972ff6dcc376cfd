// CPU kernels. Float GEMMs go to the faster of oneDNN's matmul and OpenBLAS for each shape, double
// ones to OpenBLAS; float exp() work (sigmoid, softmax) to oneDNN's element-wise kernels. The rest
// of the element-wise work is written out here, parallelised with OpenMP over the same thread
// count, because it is a few percent of a step and needs no library.
#include "kernels/cpu/cpu_device.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/host_info.hpp"
#include "kernels/cpu/dnnl_check.hpp"
#include "kernels/cpu/dnnl_elementwise.hpp"
#include "kernels/cpu/dnnl_image_kernels.hpp"
#include "kernels/cpu/dnnl_lstm_kernel.hpp"
#include "kernels/cpu/dnnl_matmul.hpp"
#include "kernels/cpu/fastest_float_gemm.hpp"

namespace dlscale::kernels {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr std::size_t parallel_threshold = 1 << 15;
constexpr std::size_t memory_alignment = 64;

CBLAS_TRANSPOSE to_cblas(Transpose transpose) {
  return transpose == Transpose::yes ? CblasTrans : CblasNoTrans;
}

// As torch.nn.LayerNorm's default.
constexpr double layer_norm_epsilon = 1e-5;
// The constants of GELU's tanh form: sqrt(2 / pi) and the cubic term's weight.
constexpr double gelu_sqrt_2_over_pi = 0.7978845608028654;
constexpr double gelu_cubic = 0.044715;

// Sets the entries after the diagonal of a [rows x rows] matrix to value.
template <typename T>
void mask_after_diagonal(int matrices, int rows, T* matrix, T value) {
  const std::size_t count = std::size_t(matrices) * rows;
#pragma omp parallel for if (count * rows > parallel_threshold)
  for (std::size_t row = 0; row < count; ++row) {
    const std::size_t r = row % std::size_t(rows);
    std::fill(matrix + row * rows + r + 1, matrix + (row + 1) * rows, value);
  }
}

template <typename T>
class CpuMath final : public MathOps<T> {
 public:
  // Float GEMMs go to the faster library per shape and float exp() work to oneDNN; double ones
  // (the gradient checks) to OpenBLAS and the loops below.
  CpuMath(FastestFloatGemm* float_gemm = nullptr, DnnlElementwise* float_elementwise = nullptr)
      : float_gemm_(float_gemm), float_elementwise_(float_elementwise) {}

  void gemm(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, T alpha, const T* a,
            int lda, const T* b, int ldb, T beta, T* c, int ldc) override {
    if constexpr (std::is_same_v<T, float>)
      float_gemm_->multiply(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
      cblas_dgemm(CblasRowMajor, to_cblas(transpose_a), to_cblas(transpose_b), m, n, k, alpha, a,
                  lda, b, ldb, beta, c, ldc);
  }

  void gemm_strided_batched(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                            T alpha, const T* a, int lda, std::ptrdiff_t stride_a, const T* b,
                            int ldb, std::ptrdiff_t stride_b, T beta, T* c, int ldc,
                            std::ptrdiff_t stride_c, int count) override {
    if constexpr (std::is_same_v<T, float>)
      float_gemm_->multiply_batched(transpose_a, transpose_b, m, n, k, alpha, a, lda, stride_a, b,
                                    ldb, stride_b, beta, c, ldc, stride_c, count);
    else
      MathOps<T>::gemm_strided_batched(transpose_a, transpose_b, m, n, k, alpha, a, lda, stride_a,
                                       b, ldb, stride_b, beta, c, ldc, stride_c, count);
  }

  void add_row_bias(int rows, int cols, const T* bias, T* y) override {
#pragma omp parallel for if (std::size_t(rows) * cols > parallel_threshold)
    for (int r = 0; r < rows; ++r) {
      T* row = y + std::size_t(r) * cols;
#pragma omp simd
      for (int c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }

  void column_sums(int rows, int cols, const T* dy, T* sums) override {
#pragma omp parallel for if (std::size_t(rows) * cols > parallel_threshold)
    for (int c = 0; c < cols; ++c) sums[c] = T(0);
      // Rows in the outer loop keep memory access contiguous; columns are split across threads.
#pragma omp parallel if (std::size_t(rows) * cols > parallel_threshold)
    {
      const int threads = omp_get_num_threads();
      const int thread = omp_get_thread_num();
      const int begin = int(std::int64_t(cols) * thread / threads);
      const int end = int(std::int64_t(cols) * (thread + 1) / threads);
      for (int r = 0; r < rows; ++r) {
        const T* row = dy + std::size_t(r) * cols;
#pragma omp simd
        for (int c = begin; c < end; ++c) sums[c] += row[c];
      }
    }
  }

  // Both ReLU loops are written so that GCC turns them into vector selects. std::min/std::max
  // (which return references) and a load of dy[i] under the condition leave it a branch per
  // element, and half of them mispredict on activations: 7-10x slower (docs/performance.md).
  void relu_forward(std::size_t count, T ceiling, const T* x, T* y) override {
#pragma omp parallel for simd if (count > parallel_threshold)
    for (std::size_t i = 0; i < count; ++i) {
      const T positive = x[i] > T(0) ? x[i] : T(0);
      y[i] = positive < ceiling ? positive : ceiling;
    }
  }

  void relu_backward(std::size_t count, T ceiling, const T* y, const T* dy, T* dx) override {
#pragma omp parallel for simd if (count > parallel_threshold)
    for (std::size_t i = 0; i < count; ++i) {
      const T output = y[i], gradient = dy[i];
      dx[i] = output > T(0) && output < ceiling ? gradient : T(0);
    }
  }

  void add(std::size_t count, const T* a, const T* b, T* y) override {
#pragma omp parallel for simd if (count > parallel_threshold)
    for (std::size_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
  }

  void sigmoid_forward(std::size_t count, const T* x, T* y) override {
    if constexpr (std::is_same_v<T, float>) {
      float_elementwise_->logistic(count, x, y);
    } else {
#pragma omp parallel for simd if (count > parallel_threshold)
      for (std::size_t i = 0; i < count; ++i) y[i] = T(1) / (T(1) + std::exp(-x[i]));
    }
  }

  void sigmoid_backward(std::size_t count, const T* y, const T* dy, T* dx) override {
#pragma omp parallel for simd if (count > parallel_threshold)
    for (std::size_t i = 0; i < count; ++i) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
  }

  void embedding_forward(int rows, int width, const T* ids, const T* table, T* y) override {
#pragma omp parallel for if (std::size_t(rows) * width > parallel_threshold)
    for (int r = 0; r < rows; ++r)
      std::copy_n(table + std::size_t(ids[r]) * width, width, y + std::size_t(r) * width);
  }

  void embedding_backward(int rows, int width, int vocabulary, const T* ids, const T* dy,
                          T* table_gradient, bool add_to_gradient) override {
    if (!add_to_gradient) std::fill_n(table_gradient, std::size_t(vocabulary) * width, T(0));
    // Serial: two rows may hit the same token, and the rows are few next to the GEMMs.
    for (int r = 0; r < rows; ++r) {
      T* row = table_gradient + std::size_t(ids[r]) * width;
      const T* gradient = dy + std::size_t(r) * width;
#pragma omp simd
      for (int c = 0; c < width; ++c) row[c] += gradient[c];
    }
  }

  // Layer norm is a few passes over memory with one square root a row: plain loops, rows split
  // over the threads, in both precisions.
  void layer_norm_forward(int rows, int width, const T* x, const T* scale_shift, T* y, T* mean,
                          T* variance) override {
    const T* scale = scale_shift;
    const T* shift = scale_shift + width;
#pragma omp parallel for if (std::size_t(rows) * width > parallel_threshold)
    for (int r = 0; r < rows; ++r) {
      const T* in = x + std::size_t(r) * width;
      T* out = y + std::size_t(r) * width;
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int c = 0; c < width; ++c) sum += in[c];
      const T row_mean = sum / T(width);
      T squares = 0;
#pragma omp simd reduction(+ : squares)
      for (int c = 0; c < width; ++c) squares += (in[c] - row_mean) * (in[c] - row_mean);
      const T row_variance = squares / T(width);
      const T inverse_deviation = T(1) / std::sqrt(row_variance + T(layer_norm_epsilon));
#pragma omp simd
      for (int c = 0; c < width; ++c)
        out[c] = (in[c] - row_mean) * inverse_deviation * scale[c] + shift[c];
      mean[r] = row_mean;
      variance[r] = row_variance;
    }
  }

  // With n = (x - mean) / deviation and g = dy * scale:
  //   dx = (g - mean(g) - n * mean(g * n)) / deviation;  dscale = sum over rows of dy * n;
  //   dshift = sum over rows of dy.
  void layer_norm_backward(int rows, int width, const T* x, const T* scale_shift, const T* mean,
                           const T* variance, const T* dy, T* dx,
                           T* scale_shift_gradient) override {
    const T* scale = scale_shift;
    T* scale_gradient = scale_shift_gradient;
    T* shift_gradient = scale_shift_gradient + width;
    std::fill_n(scale_shift_gradient, 2 * std::size_t(width), T(0));
    // The parameter gradients sum over rows: serial over rows, vectorised along them.
    for (int r = 0; r < rows; ++r) {
      const T* in = x + std::size_t(r) * width;
      const T* gradient = dy + std::size_t(r) * width;
      const T inverse_deviation = T(1) / std::sqrt(variance[r] + T(layer_norm_epsilon));
#pragma omp simd
      for (int c = 0; c < width; ++c) {
        scale_gradient[c] += gradient[c] * (in[c] - mean[r]) * inverse_deviation;
        shift_gradient[c] += gradient[c];
      }
    }
#pragma omp parallel for if (std::size_t(rows) * width > parallel_threshold)
    for (int r = 0; r < rows; ++r) {
      const T* in = x + std::size_t(r) * width;
      const T* gradient = dy + std::size_t(r) * width;
      T* out = dx + std::size_t(r) * width;
      const T inverse_deviation = T(1) / std::sqrt(variance[r] + T(layer_norm_epsilon));
      T gradient_sum = 0, gradient_dot_normalized = 0;
#pragma omp simd reduction(+ : gradient_sum, gradient_dot_normalized)
      for (int c = 0; c < width; ++c) {
        const T scaled = gradient[c] * scale[c];
        gradient_sum += scaled;
        gradient_dot_normalized += scaled * (in[c] - mean[r]) * inverse_deviation;
      }
      const T gradient_mean = gradient_sum / T(width);
      const T dot_mean = gradient_dot_normalized / T(width);
#pragma omp simd
      for (int c = 0; c < width; ++c) {
        const T normalized = (in[c] - mean[r]) * inverse_deviation;
        out[c] =
            (gradient[c] * scale[c] - gradient_mean - normalized * dot_mean) * inverse_deviation;
      }
    }
  }

  void gelu_forward(std::size_t count, const T* x, T* y) override {
    if constexpr (std::is_same_v<T, float>) {
      float_elementwise_->gelu(count, x, y);
    } else {
#pragma omp parallel for simd if (count > parallel_threshold)
      for (std::size_t i = 0; i < count; ++i) {
        const T inner = gelu_sqrt_2_over_pi * (x[i] + gelu_cubic * x[i] * x[i] * x[i]);
        y[i] = T(0.5) * x[i] * (T(1) + std::tanh(inner));
      }
    }
  }

  // gelu'(x) = (1 + t) / 2 + x / 2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t the tanh.
  void gelu_backward(std::size_t count, const T* x, const T* dy, T* dx) override {
    if constexpr (std::is_same_v<T, float>) {
      float_elementwise_->gelu_backward(count, x, dy, dx);
    } else {
#pragma omp parallel for simd if (count > parallel_threshold)
      for (std::size_t i = 0; i < count; ++i) {
        const T t = std::tanh(gelu_sqrt_2_over_pi * (x[i] + gelu_cubic * x[i] * x[i] * x[i]));
        const T derivative = T(0.5) * (T(1) + t) + T(0.5) * x[i] * (T(1) - t * t) *
                                                       gelu_sqrt_2_over_pi *
                                                       (T(1) + T(3) * gelu_cubic * x[i] * x[i]);
        dx[i] = dy[i] * derivative;
      }
    }
  }

  void causal_softmax_forward(int heads, int rows, T* scores) override {
    if (heads <= 0 || rows <= 0) return;
    if constexpr (std::is_same_v<T, float>) {
      // Scores after the diagonal become the lowest float, whose exp() is 0 beside any row's
      // largest score; then oneDNN's softmax over whole rows, and exact zeros written back.
      mask_after_diagonal(heads, rows, scores, std::numeric_limits<T>::lowest());
      float_elementwise_->softmax(heads * rows, rows, scores, scores);
      mask_after_diagonal(heads, rows, scores, T(0));
    } else {
      for (std::size_t row_index = 0; row_index < std::size_t(heads) * rows; ++row_index) {
        const auto r = int(row_index % std::size_t(rows));
        T* row = scores + row_index * rows;
        const T largest = *std::max_element(row, row + r + 1);
        T sum = 0;
        for (int c = 0; c <= r; ++c) {
          row[c] = std::exp(row[c] - largest);
          sum += row[c];
        }
        for (int c = 0; c <= r; ++c) row[c] /= sum;
        std::fill(row + r + 1, row + rows, T(0));
      }
    }
  }

  void causal_softmax_backward(int heads, int rows, const T* probabilities, T* gradient) override {
    const std::size_t row_count = std::size_t(std::max(heads, 0)) * std::max(rows, 0);
#pragma omp parallel for if (row_count * rows > parallel_threshold)
    for (std::size_t row_index = 0; row_index < row_count; ++row_index) {
      const auto r = int(row_index % std::size_t(rows));
      const T* p = probabilities + row_index * rows;
      T* g = gradient + row_index * rows;
      T weighted = 0;
#pragma omp simd reduction(+ : weighted)
      for (int c = 0; c <= r; ++c) weighted += p[c] * g[c];
#pragma omp simd
      for (int c = 0; c <= r; ++c) g[c] = p[c] * (g[c] - weighted);
      std::fill(g + r + 1, g + rows, T(0));
    }
  }

  void softmax_cross_entropy(int rows, int classes, const T* logits, const std::int32_t* labels,
                             T* dlogits, T* loss) override {
    if constexpr (std::is_same_v<T, float>) {
      // loss = -log p[label] from oneDNN's log-softmax; dlogits = (p - one_hot(label)) / rows.
      const std::size_t count = std::size_t(rows) * classes;
      float_elementwise_->log_softmax(rows, classes, logits, dlogits);
      double loss_sum = 0;
      for (int r = 0; r < rows; ++r) loss_sum -= dlogits[std::size_t(r) * classes + labels[r]];
      float_elementwise_->exp(count, dlogits, dlogits);
      const T inverse_rows = T(1) / T(rows);
#pragma omp parallel for simd if (count > parallel_threshold)
      for (std::size_t i = 0; i < count; ++i) dlogits[i] *= inverse_rows;
      for (int r = 0; r < rows; ++r) dlogits[std::size_t(r) * classes + labels[r]] -= inverse_rows;
      loss[0] = T(loss_sum / rows);
      return;
    }
    double loss_sum = 0;
    const T inverse_rows = T(1) / T(rows);
#pragma omp parallel for reduction(+ : loss_sum) if (std::size_t(rows) * classes > parallel_threshold)
    for (int r = 0; r < rows; ++r) {
      const T* z = logits + std::size_t(r) * classes;
      T* g = dlogits + std::size_t(r) * classes;
      // Subtracting the max keeps exp() in range (log-sum-exp).
      const T max_logit = *std::max_element(z, z + classes);
      double exp_sum = 0;
      for (int c = 0; c < classes; ++c) {
        g[c] = std::exp(z[c] - max_logit);
        exp_sum += g[c];
      }
      const auto scale = T(1.0 / exp_sum) * inverse_rows;
#pragma omp simd
      for (int c = 0; c < classes; ++c) g[c] *= scale;
      g[labels[r]] -= inverse_rows;
      loss_sum += std::log(exp_sum) - double(z[labels[r]] - max_logit);
    }
    loss[0] = T(loss_sum / rows);
  }

  void sgd_momentum_update(std::size_t count, T learning_rate, T momentum, T gradient_scale,
                           const T* gradient, T* velocity, T* parameters,
                           std::int32_t* nonfinite_gradient, double* squared_norm) override {
    // Without a norm to take, the loop is the update alone: no step pays for the norm it skips.
    const bool nonfinite = squared_norm == nullptr
                               ? update<false>(count, learning_rate, momentum, gradient_scale,
                                               gradient, velocity, parameters, nullptr)
                               : update<true>(count, learning_rate, momentum, gradient_scale,
                                              gradient, velocity, parameters, squared_norm);
    if (nonfinite) *nonfinite_gradient = 1;
  }

  void adamw_update(std::size_t count, T learning_rate,
                    const AdamWHyperparameters<T>& hyperparameters, T gradient_scale,
                    const T* gradient, T* first_moment, T* second_moment, T* parameters,
                    std::int64_t* step_count, std::int32_t* nonfinite_gradient,
                    double* squared_norm) override {
    const AdamWStep step = adamw_step(learning_rate, hyperparameters, ++*step_count);
    const bool nonfinite = squared_norm == nullptr
                               ? adamw<false>(count, step, gradient_scale, gradient, first_moment,
                                              second_moment, parameters, nullptr)
                               : adamw<true>(count, step, gradient_scale, gradient, first_moment,
                                             second_moment, parameters, squared_norm);
    if (nonfinite) *nonfinite_gradient = 1;
  }

  void squared_norm(std::size_t count, const T* x, double* squared_norm) override {
    double sum = 0;
#pragma omp parallel for simd reduction(+ : sum) if (count > parallel_threshold)
    for (std::size_t i = 0; i < count; ++i) sum += double(x[i]) * double(x[i]);
    *squared_norm = sum;
  }

 private:
  // The SGD step over every element; with_norm: also the scaled gradient's squared norm, into
  // *squared_norm. Returns whether any gradient was NaN or infinite.
  template <bool with_norm>
  static bool update(std::size_t count, T learning_rate, T momentum, T gradient_scale,
                     const T* gradient, T* velocity, T* parameters, double* squared_norm) {
    int nonfinite = 0;
    double sum = 0;
    // g - g is 0 for every finite g and NaN for NaN or an infinity; it vectorizes, isfinite may
    // not. The norm's few extra instructions hide behind the loop's memory traffic.
#pragma omp parallel for simd reduction(| : nonfinite) reduction(+ : sum) if (count > parallel_threshold)
    for (std::size_t i = 0; i < count; ++i) {
      nonfinite |= int(gradient[i] - gradient[i] != T(0));
      const T scaled = gradient_scale * gradient[i];
      if constexpr (with_norm) sum += double(scaled) * double(scaled);
      velocity[i] = momentum * velocity[i] + scaled;
      parameters[i] -= learning_rate * velocity[i];
    }
    if constexpr (with_norm) *squared_norm = sum;
    return nonfinite != 0;
  }

  // The constants of AdamW's t-th step. The bias corrections 1 - beta^t are taken in double, as
  // PyTorch takes them on the host, and rounded to T once.
  struct AdamWStep {
    T beta1, one_minus_beta1, beta2, one_minus_beta2, epsilon;
    T decay_factor;           // 1 - learning_rate * weight_decay
    T step_size;              // learning_rate / (1 - beta1^t)
    T bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  };
  static AdamWStep adamw_step(T learning_rate, const AdamWHyperparameters<T>& hyperparameters,
                              std::int64_t t) {
    const auto [beta1, beta2, epsilon, weight_decay] = hyperparameters;
    return {beta1,
            T(1) - beta1,
            beta2,
            T(1) - beta2,
            epsilon,
            T(1) - learning_rate * weight_decay,
            T(double(learning_rate) / (1 - std::pow(double(beta1), double(t)))),
            T(std::sqrt(1 - std::pow(double(beta2), double(t))))};
  }

  // The AdamW step over every element, as update() does SGD's.
  template <bool with_norm>
  static bool adamw(std::size_t count, const AdamWStep& step, T gradient_scale, const T* gradient,
                    T* first_moment, T* second_moment, T* parameters, double* squared_norm) {
    int nonfinite = 0;
    double sum = 0;
#pragma omp parallel for simd reduction(| : nonfinite) reduction(+ : sum) if (count > parallel_threshold)
    for (std::size_t i = 0; i < count; ++i) {
      nonfinite |= int(gradient[i] - gradient[i] != T(0));
      const T scaled = gradient_scale * gradient[i];
      if constexpr (with_norm) sum += double(scaled) * double(scaled);
      first_moment[i] = step.beta1 * first_moment[i] + step.one_minus_beta1 * scaled;
      second_moment[i] = step.beta2 * second_moment[i] + step.one_minus_beta2 * scaled * scaled;
      const T denominator = std::sqrt(second_moment[i]) / step.bias_correction2_sqrt + step.epsilon;
      parameters[i] =
          parameters[i] * step.decay_factor - step.step_size * first_moment[i] / denominator;
    }
    if constexpr (with_norm) *squared_norm = sum;
    return nonfinite != 0;
  }

  FastestFloatGemm* float_gemm_;
  DnnlElementwise* float_elementwise_;
};

class CpuEvent final : public DeviceEvent {
 public:
  std::chrono::steady_clock::time_point time;
};

std::string read_cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown CPU";
}

// The instruction set oneDNN's kernels run on here, by its own name.
std::string onednn_isa_name() {
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::sse41:
      return "sse41";
    case isa::avx:
      return "avx";
    case isa::avx2:
      return "avx2";
    case isa::avx2_vnni:
      return "avx2_vnni";
    case isa::avx512_core:
      return "avx512_core";
    case isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other (" + std::to_string(int(dnnl::get_effective_cpu_isa())) + ")";
  }
}

// Whether /proc/cpuinfo lists this CPU flag (e.g. "avx2").
bool cpu_has_flag(const std::string& flag) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0)
      return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

// What GEMMs and convolutions read under `precision`: bf16 copies, or the floats themselves.
dnnl::memory::data_type dnnl_inputs_of(Precision precision) {
  return precision == Precision::bf16 ? dnnl::memory::data_type::bf16
                                      : dnnl::memory::data_type::f32;
}

}  // namespace

CpuDevice::CpuDevice(int compute_threads, Precision precision)
    : compute_threads_(compute_threads),
      precision_(precision),
      dnnl_engine_(DLSCALE_DNNL_CHECK(dnnl::engine(dnnl::engine::kind::cpu, 0))),
      dnnl_stream_(DLSCALE_DNNL_CHECK(dnnl::stream(dnnl_engine_))),
      image_layouts_(dnnl_engine_),
      float_matmul_(
          std::make_unique<DnnlMatmul>(dnnl_engine_, dnnl_stream_, dnnl_inputs_of(precision))),
      // OpenBLAS multiplies floats only: bf16 GEMMs are oneDNN's.
      float_gemm_(std::make_unique<FastestFloatGemm>(*float_matmul_, precision == Precision::bf16
                                                                         ? FloatGemmPolicy::onednn
                                                                         : float_gemm_policy())),
      float_elementwise_(std::make_unique<DnnlElementwise>(dnnl_engine_, dnnl_stream_)),
      math_float_(std::make_unique<CpuMath<float>>(float_gemm_.get(), float_elementwise_.get())),
      math_double_(std::make_unique<CpuMath<double>>()) {
  openblas_set_num_threads(compute_threads);
  omp_set_num_threads(compute_threads);
  constexpr int openblas_uses_openmp =
      2;  // openblas_get_parallel(): 0 serial, 1 pthreads, 2 OpenMP
  if (compute_threads > 1 && openblas_get_parallel() != openblas_uses_openmp)
    spdlog::warn(
        "this OpenBLAS is not the OpenMP build; its threads and the element-wise "
        "kernels' OpenMP threads will compete (install libopenblas-openmp-dev)");
  // The float kernels are oneDNN's, chosen from the CPU's flags; say so if they fell back.
  static const bool warned = [] {
    const std::string isa = onednn_isa_name();
    if (cpu_has_flag("avx2") && (isa == "sse41" || isa == "avx"))
      spdlog::warn(
          "oneDNN runs generic {} kernels on a CPU with AVX2 (is ONEDNN_MAX_CPU_ISA "
          "set?); every GEMM and convolution will be several times slower",
          isa);
    return true;
  }();
  (void)warned;
  if (precision == Precision::bf16) {
    static const bool warned_bf16 = [] {
      const std::string isa = onednn_isa_name();
      if (isa.find("bf16") == std::string::npos && isa.find("amx") == std::string::npos)
        spdlog::warn(
            "--precision bf16: this CPU has no bf16 instructions that oneDNN uses (its kernels "
            "are {}), so oneDNN emulates bf16 with float instructions, slower than fp32",
            isa);
      return true;
    }();
    (void)warned_bf16;
  }
}

CpuDevice::~CpuDevice() = default;

std::string CpuDevice::description() const { return read_cpu_model(); }

DeviceProperties CpuDevice::properties() const {
  return {{"cpu_model", read_cpu_model()},
          {"compute_threads", std::to_string(compute_threads_)},
          {blas_property, cpu_blas_description()},
          {"onednn", fmt::format("{}.{}.{}", dnnl_version()->major, dnnl_version()->minor,
                                 dnnl_version()->patch)},
          {"onednn_image_layout", image_layouts_.native_name()},
          {"onednn_isa", onednn_isa_name()},
          {"precision", precision_name(precision_)},
          {"float_gemm",
           precision_ == Precision::bf16
               ? std::string("oneDNN matmul on bf16 copies of the inputs, float accumulation")
           : float_gemm_policy() == FloatGemmPolicy::fastest
               ? std::string("oneDNN matmul; OpenBLAS sgemm for shapes it runs 10% faster")
               : std::string(float_gemm_policy_names(float_gemm_policy())) + " (DLSCALE_CPU_GEMM)"},
          {"openblas_core", openblas_get_corename()}};
}

std::size_t CpuDevice::free_memory_bytes() const { return available_memory_bytes(); }

std::unique_ptr<DeviceEvent> CpuDevice::make_event() { return std::make_unique<CpuEvent>(); }

void CpuDevice::record(DeviceEvent& event) {
  static_cast<CpuEvent&>(event).time = std::chrono::steady_clock::now();
}

double CpuDevice::elapsed_seconds(const DeviceEvent& from, const DeviceEvent& to) {
  return std::chrono::duration<double>(static_cast<const CpuEvent&>(to).time -
                                       static_cast<const CpuEvent&>(from).time)
      .count();
}

void* CpuDevice::allocate(std::size_t bytes) {
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + memory_alignment - 1) /
                              memory_alignment * memory_alignment;
  void* pointer = std::aligned_alloc(memory_alignment, rounded);
  if (pointer == nullptr) throw std::bad_alloc();
  return pointer;
}

void CpuDevice::deallocate(void* pointer) noexcept { std::free(pointer); }

void CpuDevice::copy_to_device(void* device_destination, const void* host_source,
                               std::size_t bytes) {
  std::memcpy(device_destination, host_source, bytes);
}

void CpuDevice::copy_to_host(void* host_destination, const void* device_source, std::size_t bytes) {
  std::memcpy(host_destination, device_source, bytes);
}

void CpuDevice::copy_on_device(void* destination, const void* source, std::size_t bytes) {
  std::memcpy(destination, source, bytes);
}

std::unique_ptr<ConvolutionKernel> CpuDevice::make_convolution(
    const ConvolutionGeometry& geometry) {
  return make_dnnl_convolution(dnnl_engine_, dnnl_stream_, image_layouts_, geometry,
                               dnnl_inputs_of(precision_));
}

std::unique_ptr<PoolingKernel> CpuDevice::make_pooling(const PoolingGeometry& geometry) {
  return make_dnnl_pooling(dnnl_engine_, dnnl_stream_, image_layouts_, geometry);
}

std::unique_ptr<BatchNormKernel> CpuDevice::make_batch_norm(const BatchNormGeometry& geometry) {
  return make_dnnl_batch_norm(dnnl_engine_, dnnl_stream_, image_layouts_, geometry);
}

std::unique_ptr<LstmKernel> CpuDevice::make_lstm(const LstmGeometry& geometry) {
  if (geometry.layers != 1)
    throw std::logic_error("the CPU device runs one LSTM layer a kernel (runs_lstm_stacks)");
  return make_dnnl_lstm(dnnl_engine_, dnnl_stream_, geometry, dnnl_inputs_of(precision_));
}

MathOps<float>& CpuDevice::math_float() { return *math_float_; }
MathOps<double>& CpuDevice::math_double() { return *math_double_; }

std::string cpu_blas_description() {
  return openblas_get_config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
}

}  // namespace dlscale::kernels
