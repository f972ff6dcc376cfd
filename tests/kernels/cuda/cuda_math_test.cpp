// The CUDA device's MathOps against the CPU device's, function by function, in float and double,
// on random inputs of realistic and awkward sizes; TF32 and bf16 GEMMs against FP32; the GPU's
// bf16 rounding against the CPU's; and repeated runs of the reductions, which must be
// bit-identical. Needs a GPU: the build registers it only there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iterator>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "comm/bf16_sum.hpp"
#include "core/errors.hpp"
#include "core/random.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/cublaslt_bias_gemm.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/device_array.hpp"
#include "tests/kernels/relative_error.hpp"
#include "tests/kernels/scoped_setting.hpp"

namespace dlscale::kernels {
namespace {

// One CPU and one GPU device for the whole program (a GPU's handles are slow to create), made
// before the first test and destroyed before exit.
class Devices : public ::testing::Environment {
 public:
  void SetUp() override {
    cpu = std::make_unique<CpuDevice>(1);
    gpu = std::make_unique<CudaDevice>(0, Precision::fp32);
  }
  void TearDown() override {
    gpu.reset();
    cpu.reset();
  }
  static inline std::unique_ptr<CpuDevice> cpu;
  static inline std::unique_ptr<CudaDevice> gpu;
};
[[maybe_unused]] ::testing::Environment* const devices_environment =
    ::testing::AddGlobalTestEnvironment(new Devices);

// ---------------------------------------------------------------------------------------------
// Tolerances, as multiples of the scale of each result (sum of the magnitudes that made it).

template <typename T>
constexpr double epsilon = std::numeric_limits<T>::epsilon();
// GEMM: |gpu - cpu| <= this * (|alpha| sum_k |a_ik b_kj| + |beta c_ij|).
template <typename T>
constexpr double gemm_tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-12;
// TF32 products keep 10 mantissa bits: |tf32 - fp32| <= 1e-2 * the same scale.
constexpr double tf32_tolerance = 1e-2;
// bf16 GEMMs: relative L2 error against float, the bound tests/workloads/bf16_precision_test.cpp
// holds the CPU's bf16 GEMMs to (operands rounded by up to 2^-9 of themselves, sums in float).
constexpr double bf16_relative_l2_tolerance = 0.01;
// Column sums: |gpu - cpu| <= this * sum_r |dy_rc| (the two add in different orders).
template <typename T>
constexpr double sum_tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-13;
// exp differs by an ulp or two between CUDA and glibc: sigmoid within 8 ulp, relative.
template <typename T>
constexpr double sigmoid_tolerance = 8 * epsilon<T>;
// Softmax cross-entropy loss, relative to the magnitudes that make it (the dlogits: against the
// exact ones, exact_softmax_gradient).
template <typename T>
constexpr double softmax_tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-12;
// SGD: the GPU fuses multiply-adds, the CPU rounds each product: a few ulp of the terms.
template <typename T>
constexpr double sgd_tolerance = 4 * epsilon<T>;
// Below every relative tolerance: a few subnormal steps, for results that underflow.
template <typename T>
constexpr double underflow_floor = 8 * double(std::numeric_limits<T>::denorm_min());
// A result below the smallest normal number may be flushed to zero by one device and kept as a
// subnormal by the other: oneDNN's vectorised logistic flushes sigmoid(-88) = 6.05e-39 to 0 on
// the CPU, CUDA's expf keeps it (H200, issue 30). Both are within this of the exact value.
template <typename T>
constexpr double flush_to_zero_floor = double(std::numeric_limits<T>::min());
// Element-wise copies, additions, ReLU, sigmoid backward, the bias and the embedding are the
// same arithmetic in the same order on both devices: they must agree exactly.

template <typename T>
const char* type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

template <typename... Parts>
std::string describe(const Parts&... parts) {
  std::ostringstream text;
  (text << ... << parts);
  return text.str();
}

// Fails naming `what` and the first few indices where |gpu - cpu| > tolerance(index). Equal
// values (infinities included) and NaN against NaN pass.
template <typename T, typename Tolerance>
void expect_close(const std::string& what, const std::vector<T>& cpu, const std::vector<T>& gpu,
                  Tolerance tolerance) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double expected = cpu[i];
    const double actual = gpu[i];
    if (expected == actual || (std::isnan(expected) && std::isnan(actual))) continue;
    const double allowed = tolerance(i);
    if (std::abs(actual - expected) <= allowed) continue;
    if (++failures <= 5)
      ADD_FAILURE() << std::setprecision(17) << what << ": index " << i << ": GPU " << actual
                    << ", CPU " << expected << " (difference " << std::abs(actual - expected)
                    << ", tolerance " << allowed << ")";
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << cpu.size() << " values differ";
}

template <typename T>
void expect_equal(const std::string& what, const std::vector<T>& cpu, const std::vector<T>& gpu) {
  expect_close(what, cpu, gpu, [](std::size_t) { return 0.0; });
}

template <typename T>
void expect_bit_identical(const std::string& what, const std::vector<T>& first,
                          const std::vector<T>& second) {
  ASSERT_EQ(first.size(), second.size()) << what;
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(T)), 0)
      << what << ": two runs on the GPU differ";
}

// Uniform values in [low, high), seeded by `stream`.
template <typename T>
std::vector<T> uniform_values(std::size_t count, double low, double high, std::uint64_t stream) {
  const CounterRandom random(2718, stream);
  std::vector<T> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = T(low + (high - low) * random.uniform(i));
  return values;
}

// Token ids in [0, vocabulary), stored as T like the embedding's input.
template <typename T>
std::vector<T> random_ids(std::size_t count, int vocabulary, std::uint64_t stream) {
  const CounterRandom random(2718, stream);
  std::vector<T> ids(count);
  for (std::size_t i = 0; i < count; ++i)
    ids[i] = T(std::min(int(random.uniform(i) * vocabulary), vocabulary - 1));
  return ids;
}

template <typename T>
DeviceArray<T> upload(Device& device, const std::vector<T>& values) {
  DeviceArray<T> array(device, values.size());
  array.copy_from_host(values);
  return array;
}

template <typename T>
std::vector<T> download(Device& device, const DeviceArray<T>& array) {
  device.synchronize();
  return array.to_host();
}

template <typename T>
class CudaMathTest : public ::testing::Test {
 protected:
  static CpuDevice& cpu() { return *Devices::cpu; }
  static CudaDevice& gpu() { return *Devices::gpu; }
};
using ScalarTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CudaMathTest, ScalarTypes);

// ---------------------------------------------------------------------------------------------
// GEMM

struct GemmShape {
  int m, n, k;
  int padding;  // added to every leading dimension beyond the row width
};

// op(a)[i][p] of a row-major matrix stored with leading dimension `ld`.
template <typename T>
double element(const std::vector<T>& matrix, Transpose transpose, int ld, int i, int p) {
  return transpose == Transpose::no ? matrix[std::size_t(i) * ld + p]
                                    : matrix[std::size_t(p) * ld + i];
}

// Runs c = alpha op(a) op(b) + beta c on `device` and returns c (leading dimension n + padding).
template <typename T>
std::vector<T> run_gemm(Device& device, Transpose transpose_a, Transpose transpose_b,
                        const GemmShape& shape, T alpha, const std::vector<T>& a, int lda,
                        const std::vector<T>& b, int ldb, T beta, const std::vector<T>& c,
                        int ldc) {
  auto device_a = upload(device, a);
  auto device_b = upload(device, b);
  auto device_c = upload(device, c);
  device.math<T>().gemm(transpose_a, transpose_b, shape.m, shape.n, shape.k, alpha, device_a.data(),
                        lda, device_b.data(), ldb, beta, device_c.data(), ldc);
  return download(device, device_c);
}

// Compares `device`'s GEMM with the CPU's on random operands, each result within
// `tolerance` * (|alpha| sum_k |a_ik b_kj| + |beta c_ij|); the padding of c must stay untouched.
template <typename T>
void check_gemm(Device& device, Transpose transpose_a, Transpose transpose_b,
                const GemmShape& shape, T alpha, T beta, double tolerance, std::uint64_t seed) {
  const auto [m, n, k, padding] = shape;
  const int lda = (transpose_a == Transpose::no ? k : m) + padding;
  const int ldb = (transpose_b == Transpose::no ? n : k) + padding;
  const int ldc = n + padding;
  const auto a =
      uniform_values<T>(std::size_t(transpose_a == Transpose::no ? m : k) * lda, -1, 1, seed);
  const auto b =
      uniform_values<T>(std::size_t(transpose_b == Transpose::no ? k : n) * ldb, -1, 1, seed + 1);
  const auto c = uniform_values<T>(std::size_t(m) * ldc, -1, 1, seed + 2);

  std::vector<double> scale(c.size(), 0.0);  // 0 in the padding: it must not change
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p)
        sum += std::abs(element(a, transpose_a, lda, i, p) * element(b, transpose_b, ldb, p, j));
      scale[std::size_t(i) * ldc + j] =
          std::abs(double(alpha)) * sum + std::abs(double(beta) * c[std::size_t(i) * ldc + j]);
    }

  const auto expected =
      run_gemm(*Devices::cpu, transpose_a, transpose_b, shape, alpha, a, lda, b, ldb, beta, c, ldc);
  const auto actual =
      run_gemm(device, transpose_a, transpose_b, shape, alpha, a, lda, b, ldb, beta, c, ldc);
  const std::string what =
      describe("gemm<", type_name<T>(), "> ", transpose_a == Transpose::yes ? "A^T" : "A", " ",
               transpose_b == Transpose::yes ? "B^T" : "B", " m=", m, " n=", n, " k=", k,
               " padding=", padding, " alpha=", alpha, " beta=", beta);
  expect_close(what, expected, actual, [&](std::size_t i) { return tolerance * scale[i]; });
}

TYPED_TEST(CudaMathTest, GemmMatchesCpuForAllTranspositions) {
  using T = TypeParam;
  const GemmShape shapes[] = {{1, 1, 1, 0},   {7, 5, 3, 0},   {33, 17, 65, 0}, {64, 48, 200, 0},
                              {1, 130, 9, 0}, {31, 1, 40, 0}, {9, 11, 13, 3}};
  std::uint64_t seed = 100;
  for (const GemmShape& shape : shapes)
    for (Transpose transpose_a : {Transpose::no, Transpose::yes})
      for (Transpose transpose_b : {Transpose::no, Transpose::yes}) {
        check_gemm<T>(this->gpu(), transpose_a, transpose_b, shape, T(1), T(0), gemm_tolerance<T>,
                      seed += 3);
        check_gemm<T>(this->gpu(), transpose_a, transpose_b, shape, T(1.5), T(-0.5),
                      gemm_tolerance<T>, seed += 3);
      }
}

TEST(CudaMathTf32, GemmAgreesWithFp32WithinTf32Precision) {
  CudaDevice tf32(0, Precision::tf32);
  const GemmShape shape{256, 192, 1024, 0};
  for (Transpose transpose_a : {Transpose::no, Transpose::yes})
    for (Transpose transpose_b : {Transpose::no, Transpose::yes})
      check_gemm<float>(tf32, transpose_a, transpose_b, shape, 1.0f, 0.0f, tf32_tolerance, 900);

  // TF32 rounds the operands to 10 mantissa bits, so on tensor cores the result cannot be the
  // FP32 one bit for bit: equal results would mean the precision never reached cuBLAS.
  const int k = shape.k;
  const auto a = uniform_values<float>(std::size_t(shape.m) * k, -1, 1, 910);
  const auto b = uniform_values<float>(std::size_t(k) * shape.n, -1, 1, 911);
  const std::vector<float> c(std::size_t(shape.m) * shape.n, 0.0f);
  const auto fp32 = run_gemm(*Devices::gpu, Transpose::no, Transpose::no, shape, 1.0f, a, k, b,
                             shape.n, 0.0f, c, shape.n);
  const auto reduced = run_gemm<float>(tf32, Transpose::no, Transpose::no, shape, 1.0f, a, k, b,
                                       shape.n, 0.0f, c, shape.n);
  double largest_difference = 0;
  for (std::size_t i = 0; i < fp32.size(); ++i)
    largest_difference = std::max(largest_difference, std::abs(double(fp32[i]) - reduced[i]));
  EXPECT_GT(largest_difference, 0.0)
      << "the TF32 device's GEMM equals the FP32 device's bit for bit: TF32 was not used";
}

// bf16 GEMMs (bf16 copies of A and B, float C) against the CPU's float ones, for every
// transposition, with padded leading dimensions and a C that beta reads; and not equal to them,
// or the bf16 path never ran.
TEST(CudaMathBf16, GemmStaysWithinOnePercentOfFloat) {
  CudaDevice bf16(0, Precision::bf16);
  const GemmShape shapes[] = {{256, 192, 1024, 0}, {33, 17, 65, 3}, {32, 200, 300, 0}};
  std::uint64_t seed = 950;
  for (const GemmShape& shape : shapes)
    for (Transpose transpose_a : {Transpose::no, Transpose::yes})
      for (Transpose transpose_b : {Transpose::no, Transpose::yes})
        for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{1.5f, -0.5f}}) {
          const auto [m, n, k, padding] = shape;
          const int lda = (transpose_a == Transpose::no ? k : m) + padding;
          const int ldb = (transpose_b == Transpose::no ? n : k) + padding;
          const int ldc = n + padding;
          const auto a = uniform_values<float>(
              std::size_t(transpose_a == Transpose::no ? m : k) * lda, -1, 1, seed += 3);
          const auto b = uniform_values<float>(
              std::size_t(transpose_b == Transpose::no ? k : n) * ldb, -1, 1, seed + 1);
          const auto c = uniform_values<float>(std::size_t(m) * ldc, -1, 1, seed + 2);
          const auto expected = run_gemm(*Devices::cpu, transpose_a, transpose_b, shape, alpha, a,
                                         lda, b, ldb, beta, c, ldc);
          const auto actual =
              run_gemm(bf16, transpose_a, transpose_b, shape, alpha, a, lda, b, ldb, beta, c, ldc);
          const std::string what =
              describe("bf16 gemm ", transpose_a == Transpose::yes ? "A^T" : "A", " ",
                       transpose_b == Transpose::yes ? "B^T" : "B", " m=", m, " n=", n, " k=", k,
                       " padding=", padding, " alpha=", alpha, " beta=", beta);
          const double error = relative_l2(expected, actual);
          EXPECT_LE(error, bf16_relative_l2_tolerance) << what;
          EXPECT_GT(error, 1e-4) << what << ": equal to float's; did a bf16 GEMM run?";
          for (int i = 0; i < m; ++i)
            for (int j = n; j < ldc; ++j)
              EXPECT_EQ(actual[std::size_t(i) * ldc + j], c[std::size_t(i) * ldc + j])
                  << what << ": the padding of C changed";
        }
}

// The default (DLSCALE_CUDA_BATCHED_GEMM=cublas): the strided batch of an attention layer's S = Q
// K^T (3 heads, each head's Q and K 8 columns after the previous head's inside rows of 96, scores
// dense) and its accumulating dK = dS^T Q, as one cublasGemmStridedBatchedEx, against the CPU's
// batch, in fp32, bf16 (within bf16's precision of float, and not equal to it) and double.
TEST(CudaMathBatched, StridedBatchedGemmMatchesTheCpuInEveryPrecision) {
  CudaDevice fp32(0, Precision::fp32), bf16(0, Precision::bf16);
  ASSERT_TRUE(fp32.context().cublas_strided_batched) << "the batched call is the default";
  constexpr int steps = 40, head_width = 8, row = 96, heads = 3;
  constexpr std::ptrdiff_t scores = steps * steps;
  const std::size_t buffer = std::size_t(heads) * scores + std::size_t(steps) * row;
  const auto a = uniform_values<float>(buffer, -1, 1, 1201);
  const auto b = uniform_values<float>(buffer, -1, 1, 1202);
  const auto c = uniform_values<float>(buffer, -1, 1, 1203);
  struct Case {
    const char* what;
    Transpose ta, tb;
    int m, n, k, lda, ldb, ldc;
    std::ptrdiff_t sa, sb, sc;
    float beta;
  };
  for (const Case& g :
       {Case{"S = Q K^T", Transpose::no, Transpose::yes, steps, steps, head_width, row, row, steps,
             head_width, head_width, scores, 0.0f},
        Case{"dK = dS^T Q + beta C", Transpose::yes, Transpose::no, steps, head_width, steps, steps,
             row, row, scores, head_width, head_width, 0.5f}}) {
    const auto run = [&]<typename T>(Device& device, const std::vector<T>& x,
                                     const std::vector<T>& y, const std::vector<T>& z) {
      auto da = upload(device, x), db = upload(device, y), dc = upload(device, z);
      device.math<T>().gemm_strided_batched(g.ta, g.tb, g.m, g.n, g.k, T(0.35), da.data(), g.lda,
                                            g.sa, db.data(), g.ldb, g.sb, T(g.beta), dc.data(),
                                            g.ldc, g.sc, heads);
      return download(device, dc);
    };
    const auto expected = run(*Devices::cpu, a, b, c);
    const auto on_fp32 = run(fp32, a, b, c);
    const auto on_bf16 = run(bf16, a, b, c);
    EXPECT_LE(relative_l2(expected, on_fp32), 1e-6) << g.what << " fp32";
    const double bf16_error = relative_l2(expected, on_bf16);
    EXPECT_LE(bf16_error, bf16_relative_l2_tolerance) << g.what << " bf16";
    EXPECT_GT(bf16_error, 1e-5) << g.what << ": bf16 equal to float's; did a bf16 GEMM run?";
    const std::vector<double> wide_a(a.begin(), a.end()), wide_b(b.begin(), b.end()),
        wide_c(c.begin(), c.end());
    const auto expected_double = run(*Devices::cpu, wide_a, wide_b, wide_c);
    const auto looping = [] {
      const dlscale::testing::ScopedSetting loop("DLSCALE_CUDA_BATCHED_GEMM", "loop");
      return std::make_unique<CudaDevice>(0, Precision::fp32);
    };
    const std::unique_ptr<CudaDevice> looping_device = looping();
    CudaDevice& looping_double = *looping_device;
    ASSERT_FALSE(looping_double.context().cublas_strided_batched);
    const auto on_double = run(looping_double, wide_a, wide_b, wide_c);
    const auto on_batched_double = run(*Devices::gpu, wide_a, wide_b, wide_c);
    const auto largest_difference = [&](const std::vector<double>& actual) {
      double largest = 0;
      for (std::size_t i = 0; i < actual.size(); ++i)
        largest = std::max(largest, std::abs(actual[i] - expected_double[i]));
      return largest;
    };
    EXPECT_LE(largest_difference(on_double), 1e-13) << g.what << " double, one at a time";
    EXPECT_LE(largest_difference(on_batched_double), 1e-13) << g.what << " double";
  }
}

// A dense layer's backward in one call under bf16 (dy rounded once for both GEMMs, the bias
// gradient summed in the same pass): its weight and input gradients bit for bit those of the
// three separate calls it replaces (the same cuBLAS calls on the same bf16 copies), its bias
// gradient within float rounding of theirs (a different order of additions), all three within
// bf16's bound of the CPU's float; with a 10,000-word head's width and rows not a multiple of
// anything, and without a bias or an input gradient (an output head, a first layer). With
// DLSCALE_CUDA_PADDED_BF16_ROWS=yes (dy's bf16 rows padded to 8 values where there is no bias) the
// same gradients within float rounding (another GEMM kernel may add in another order), and with
// DLSCALE_CUDA_BATCHED_LOADS=yes too the very same ones.
TEST(CudaMathBf16, LinearBackwardRoundsTheOutputGradientOnceAndMatchesItsThreeCalls) {
  const auto device_with = [](const char* padded_rows, const char* batched_loads) {
    const dlscale::testing::ScopedSetting rows("DLSCALE_CUDA_PADDED_BF16_ROWS", padded_rows);
    const dlscale::testing::ScopedSetting loads("DLSCALE_CUDA_BATCHED_LOADS", batched_loads);
    return std::make_unique<CudaDevice>(0, Precision::bf16);
  };
  const auto default_device = device_with(nullptr, nullptr);
  ASSERT_TRUE(default_device->context().padded_bf16_rows) << "padded rows are the default";
  ASSERT_TRUE(default_device->context().batched_loads) << "batched loads are the default";
  const auto unpadded_device = device_with("no", "no");
  CudaDevice& bf16 = *unpadded_device;
  const auto padded_device = device_with("yes", "no");
  const auto padded_batched_device = device_with("yes", "yes");
  ASSERT_TRUE(padded_device->context().padded_bf16_rows);
  ASSERT_FALSE(padded_device->context().batched_loads);
  ASSERT_TRUE(padded_batched_device->context().batched_loads);
  ASSERT_FALSE(bf16.context().padded_bf16_rows) << "DLSCALE_CUDA_PADDED_BF16_ROWS=no";
  struct Case {
    int rows, inputs, outputs;
    bool bias, input_gradient;
  };
  for (const Case& c : {Case{1000, 64, 10000, true, true}, Case{333, 96, 257, false, true},
                        Case{65, 40, 24, true, false}, Case{129, 64, 1003, false, true}}) {
    const std::string what = describe("rows=", c.rows, " inputs=", c.inputs, " outputs=", c.outputs,
                                      " bias=", c.bias, " input gradient=", c.input_gradient);
    const auto x = uniform_values<float>(std::size_t(c.rows) * c.inputs, -1, 1, 1301);
    const auto w = uniform_values<float>(std::size_t(c.outputs) * c.inputs, -1, 1, 1302);
    const auto dy = uniform_values<float>(std::size_t(c.rows) * c.outputs, -1, 1, 1303);
    struct Gradients {
      std::vector<float> weights, bias, input;
    };
    const auto run = [&](Device& device, bool one_call) {
      auto dx_ = upload(device, x), dw_ = upload(device, w), ddy = upload(device, dy);
      // NaN in every output first, so that a comparison fails unless the call writes all of it.
      const float nan = std::numeric_limits<float>::quiet_NaN();
      auto weight_gradient = upload(device, std::vector<float>(w.size(), nan));
      auto bias_gradient = upload(device, std::vector<float>(std::size_t(c.outputs), nan));
      auto input_gradient = upload(device, std::vector<float>(x.size(), nan));
      MathOps<float>& math = device.math_float();
      float* bias_out = c.bias ? bias_gradient.data() : nullptr;
      float* input_out = c.input_gradient ? input_gradient.data() : nullptr;
      if (one_call)
        math.linear_backward(c.rows, c.inputs, c.outputs, dx_.data(), dw_.data(), ddy.data(),
                             weight_gradient.data(), bias_out, input_out);
      else  // the calls the default makes, as the dense layer made them before
        math.MathOps<float>::linear_backward(c.rows, c.inputs, c.outputs, dx_.data(), dw_.data(),
                                             ddy.data(), weight_gradient.data(), bias_out,
                                             input_out);
      return Gradients{download(device, weight_gradient),
                       c.bias ? download(device, bias_gradient) : std::vector<float>{},
                       c.input_gradient ? download(device, input_gradient) : std::vector<float>{}};
    };
    const Gradients cpu = run(*Devices::cpu, true);
    const Gradients fused = run(bf16, true);
    const Gradients separate = run(bf16, false);
    const Gradients padded = run(*padded_device, true);
    // DLSCALE_CUDA_BATCHED_LOADS=yes: the same roundings, read four at a time.
    const Gradients padded_batched = run(*padded_batched_device, true);
    EXPECT_EQ(padded.weights, padded_batched.weights) << what << ": batched loads";
    EXPECT_EQ(padded.bias, padded_batched.bias) << what << ": batched loads";
    EXPECT_EQ(padded.input, padded_batched.input) << what << ": batched loads";
    EXPECT_LE(relative_l2(fused.weights, padded.weights), 1e-5) << what << ": padded rows";
    if (c.input_gradient)
      EXPECT_LE(relative_l2(fused.input, padded.input), 1e-5) << what << ": padded rows";
    EXPECT_EQ(fused.weights, separate.weights) << what << ": weight gradient";
    EXPECT_EQ(fused.input, separate.input) << what << ": input gradient";
    if (c.bias) EXPECT_LE(relative_l2(separate.bias, fused.bias), 1e-5) << what << ": bias";
    for (const auto& [name, expected, actual] :
         {std::tuple{"weight gradient", &cpu.weights, &fused.weights},
          std::tuple{"bias gradient", &cpu.bias, &fused.bias},
          std::tuple{"input gradient", &cpu.input, &fused.input}}) {
      ASSERT_EQ(expected->size(), actual->size()) << what << ": " << name;
      if (expected->empty()) continue;
      EXPECT_LE(relative_l2(*expected, *actual), bf16_relative_l2_tolerance)
          << what << ": " << name;
    }
    EXPECT_GT(relative_l2(cpu.weights, fused.weights), 1e-4) << what << ": did a bf16 GEMM run?";
  }
}

// The device's property `wanted`, or "absent".
std::string device_property(const CudaDevice& device, const char* wanted) {
  for (const auto& [name, value] : device.properties())
    if (name == wanted) return value;
  return "absent";
}

// DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=yes: a dense layer's forward as one cuBLASLt matmul adding the
// bias in its epilogue gives what the GEMM and the bias kernel give, within float rounding (the
// same products, summed by another kernel and rounded once), in every precision; over a
// 10,000-word head's width, widths that are no multiple of anything, and a bias large beside
// the products (so that a bias left out could not pass). A bias off a 16-byte boundary is left
// to the GEMM and the bias kernel, with the same results.
TEST(CudaMathLinearForward, BiasEpilogueMatchesTheGemmAndBiasKernel) {
  for (const Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16}) {
    const auto device_with = [&](const char* epilogue) {
      const dlscale::testing::ScopedSetting setting("DLSCALE_CUDA_GEMM_BIAS_EPILOGUE", epilogue);
      return std::make_unique<CudaDevice>(0, precision);
    };
    const auto fused_device = device_with("yes");
    const auto plain_device = device_with("no");
    ASSERT_NE(fused_device->context().bias_gemm, nullptr);
    ASSERT_EQ(plain_device->context().bias_gemm, nullptr);
    struct Case {
      int rows, inputs, outputs;
    };
    for (const Case& c :
         {Case{1000, 64, 10000}, Case{333, 96, 257}, Case{65, 40, 24}, Case{8, 768, 2304}}) {
      const std::string what = describe(precision_name(precision), " rows=", c.rows,
                                        " inputs=", c.inputs, " outputs=", c.outputs);
      const auto x = uniform_values<float>(std::size_t(c.rows) * c.inputs, -1, 1, 1401);
      const auto w = uniform_values<float>(std::size_t(c.outputs) * c.inputs, -1, 1, 1402);
      // One spare value in front, so that the bias can also start off a 16-byte boundary.
      const auto bias = uniform_values<float>(std::size_t(c.outputs) + 1, 10, 20, 1403);
      const auto run = [&](Device& device, std::size_t bias_offset) {
        auto d_x = upload(device, x), d_w = upload(device, w), d_bias = upload(device, bias);
        auto y = upload(device, std::vector<float>(std::size_t(c.rows) * c.outputs,
                                                   std::numeric_limits<float>::quiet_NaN()));
        device.math_float().linear_forward(c.rows, c.inputs, c.outputs, d_x.data(), d_w.data(),
                                           d_bias.data() + bias_offset, y.data());
        return download(device, y);
      };
      const auto plain = run(*plain_device, 0);
      const std::size_t runs_before = fused_device->context().bias_gemm->runs();
      const auto fused = run(*fused_device, 0);
      ASSERT_EQ(fused_device->context().bias_gemm->runs(), runs_before + 1)
          << what << ": cuBLASLt offered no algorithm, so the epilogue never ran";
      ASSERT_EQ(plain.size(), fused.size()) << what;
      EXPECT_TRUE(std::all_of(fused.begin(), fused.end(), [](float v) { return std::isfinite(v); }))
          << what << ": the fused call left values unwritten";
      // Under tf32 the two kernels may convert float operands to TF32 differently (rounding or
      // truncating the 13 low bits): their sums then differ by up to TF32's precision.
      EXPECT_LE(relative_l2(plain, fused), precision == Precision::tf32 ? 2e-4 : 1e-6) << what;
      const auto plain_shifted = run(*plain_device, 1);
      const auto unaligned = run(*fused_device, 1);
      EXPECT_EQ(fused_device->context().bias_gemm->runs(), runs_before + 1)
          << what << ": an unaligned bias went to the epilogue";
      EXPECT_EQ(plain_shifted, unaligned) << what << ": a bias off 16 bytes";
      // Two layers of one shape, each with its own bias, both buffers alive (so that the second
      // cannot land where the first was): the plan is shared, the bias pointer is each call's.
      const auto other_bias = uniform_values<float>(std::size_t(c.outputs), -20, -10, 1404);
      const auto two_layers = [&](Device& device) {
        auto d_x = upload(device, x), d_w = upload(device, w);
        auto first_bias = upload(device, bias), second_bias = upload(device, other_bias);
        auto y = upload(device, std::vector<float>(std::size_t(c.rows) * c.outputs));
        auto y_other = upload(device, std::vector<float>(std::size_t(c.rows) * c.outputs));
        device.math_float().linear_forward(c.rows, c.inputs, c.outputs, d_x.data(), d_w.data(),
                                           first_bias.data(), y.data());
        device.math_float().linear_forward(c.rows, c.inputs, c.outputs, d_x.data(), d_w.data(),
                                           second_bias.data(), y_other.data());
        return download(device, y_other);
      };
      const auto plain_other = two_layers(*plain_device);
      const auto fused_other = two_layers(*fused_device);
      EXPECT_EQ(fused_device->context().bias_gemm->runs(), runs_before + 3)
          << what << ": two layers of one shape did not both take the epilogue";
      EXPECT_LE(relative_l2(plain_other, fused_other), precision == Precision::tf32 ? 2e-4 : 1e-6)
          << what << ": the second layer's bias";
    }
  }
}

// DLSCALE_CUDA_GEMM_BIAS_EPILOGUE takes yes (the default) or no, is recorded as the device
// property gemm_bias_epilogue and in changed_settings where no, and refuses anything else in
// one line before the device is made.
TEST(CudaMathSettings, GemmBiasEpilogueIsYesOrNo) {
  const dlscale::testing::DefaultGpuSettings defaults;
  for (const char* yes : {static_cast<const char*>(nullptr), "yes"}) {
    const dlscale::testing::ScopedSetting setting("DLSCALE_CUDA_GEMM_BIAS_EPILOGUE", yes);
    const CudaDevice device(0, Precision::fp32);
    EXPECT_NE(device.context().bias_gemm, nullptr) << (yes ? yes : "unset");
    EXPECT_EQ(device_property(device, "gemm_bias_epilogue"), "yes") << (yes ? yes : "unset");
    EXPECT_EQ(device_property(device, "changed_settings"), "absent") << (yes ? yes : "unset");
  }
  {
    const dlscale::testing::ScopedSetting no("DLSCALE_CUDA_GEMM_BIAS_EPILOGUE", "no");
    const CudaDevice device(0, Precision::fp32);
    EXPECT_EQ(device.context().bias_gemm, nullptr);
    EXPECT_EQ(device_property(device, "gemm_bias_epilogue"), "no");
    EXPECT_EQ(device_property(device, "changed_settings"), "gemm_bias_epilogue no");
  }
  const dlscale::testing::ScopedSetting bad("DLSCALE_CUDA_GEMM_BIAS_EPILOGUE", "on");
  try {
    const CudaDevice refused(0, Precision::fp32);
    ADD_FAILURE() << "DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=on was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(std::string(error.what()),
              "DLSCALE_CUDA_GEMM_BIAS_EPILOGUE: unknown GEMM bias epilogue 'on' (available: no, "
              "yes)");
  }
}

// DLSCALE_CUDNN_LSTM_STACK takes yes (the default) or no, is recorded as the device property
// lstm_stack and in changed_settings where no, and refuses anything else in one line before the
// device is made; with no the device makes no kernel for a stack.
TEST(CudaMathSettings, LstmStackIsYesOrNo) {
  const dlscale::testing::DefaultGpuSettings defaults;
  for (const char* yes : {static_cast<const char*>(nullptr), "yes"}) {
    const dlscale::testing::ScopedSetting setting("DLSCALE_CUDNN_LSTM_STACK", yes);
    CudaDevice device(0, Precision::fp32);
    EXPECT_TRUE(device.runs_lstm_stacks()) << (yes ? yes : "unset");
    EXPECT_EQ(device_property(device, "lstm_stack"), "yes") << (yes ? yes : "unset");
    EXPECT_EQ(device_property(device, "changed_settings"), "absent") << (yes ? yes : "unset");
    EXPECT_NE(device.make_lstm({4, 8, 8, 2}), nullptr) << (yes ? yes : "unset");
  }
  {
    const dlscale::testing::ScopedSetting no("DLSCALE_CUDNN_LSTM_STACK", "no");
    CudaDevice device(0, Precision::fp32);
    EXPECT_FALSE(device.runs_lstm_stacks());
    EXPECT_EQ(device_property(device, "lstm_stack"), "no");
    EXPECT_EQ(device_property(device, "changed_settings"), "lstm_stack no");
    EXPECT_THROW(device.make_lstm({4, 8, 8, 2}), std::logic_error);
  }
  const dlscale::testing::ScopedSetting bad("DLSCALE_CUDNN_LSTM_STACK", "2");
  try {
    const CudaDevice refused(0, Precision::fp32);
    ADD_FAILURE() << "DLSCALE_CUDNN_LSTM_STACK=2 was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(std::string(error.what()),
              "DLSCALE_CUDNN_LSTM_STACK: unknown LSTM stack '2' (available: no, yes)");
  }
}

// The GPU rounds to bf16 as the MPI backend's bf16 sums do on the CPU (comm/bf16_sum.cpp): to
// nearest, ties to even, bit for bit; NaN stays NaN; widening back is exact. With one read in
// flight per thread and with four (DLSCALE_CUDA_BATCHED_LOADS): 3 million values, so that the
// grid-stride loop makes whole batches and a tail.
TEST(CudaMathBf16, RoundingMatchesTheCpuBitForBit) {
  CudaDevice& gpu = *Devices::gpu;
  constexpr float infinity = std::numeric_limits<float>::infinity();
  std::vector<float> values = {
      0.0f,
      -0.0f,
      1.0f,
      -1.0f,
      infinity,
      -infinity,
      std::numeric_limits<float>::quiet_NaN(),
      std::numeric_limits<float>::max(),         // rounds up to infinity
      std::numeric_limits<float>::denorm_min(),  // subnormals round like any other value
      std::numeric_limits<float>::min(),
      1.0f + 0x1p-8f,             // halfway between 1 and the next bf16: ties to even, down to 1
      1.0f + 3 * 0x1p-8f,         // halfway again: ties to even, up to 1 + 2^-6
      1.0f + 0x1p-8f + 0x1p-20f,  // just above halfway: up
      -(1.0f + 0x1p-8f)};
  const auto random = uniform_values<float>(3000000, -1e4, 1e4, 990);
  values.insert(values.end(), random.begin(), random.end());
  std::vector<std::uint16_t> cpu_rounded(values.size());
  std::vector<float> cpu_widened(values.size());
  comm::round_to_bf16(values, cpu_rounded);
  comm::widen_from_bf16(cpu_rounded, cpu_widened);

  for (const bool batched_loads : {false, true}) {
    auto from = upload(gpu, values);
    DeviceArray<std::uint16_t> rounded(gpu, values.size());
    DeviceArray<float> widened(gpu, values.size());
    round_to_bf16(from.data(), reinterpret_cast<__nv_bfloat16*>(rounded.data()), values.size(),
                  gpu.context().stream, batched_loads);
    widen_to_float(reinterpret_cast<const __nv_bfloat16*>(rounded.data()), widened.data(),
                   values.size(), gpu.context().stream, batched_loads);
    const auto gpu_rounded = download(gpu, rounded);
    const auto gpu_widened = download(gpu, widened);
    std::size_t failures = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const bool agree = std::isnan(values[i]) ? std::isnan(gpu_widened[i])
                                               : gpu_rounded[i] == cpu_rounded[i] &&
                                                     std::memcmp(&gpu_widened[i], &cpu_widened[i],
                                                                 sizeof(float)) == 0;
      if (!agree && ++failures <= 5)
        ADD_FAILURE() << std::setprecision(9) << "batched loads " << batched_loads << ", index "
                      << i << ": " << values[i] << " rounds to bf16 bits " << std::hex
                      << gpu_rounded[i] << " on the GPU, " << cpu_rounded[i] << " on the CPU"
                      << std::dec << " (widened " << gpu_widened[i] << " and " << cpu_widened[i]
                      << ")";
    }
    EXPECT_EQ(failures, 0u) << failures << " of " << values.size()
                            << " roundings differ, batched loads " << batched_loads;
  }
}

// The element-wise ops on bf16 images (DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16: a residual block's
// sum, its ReLU, a ReLU6 and their gradients) read and write bf16 where the images lie, compute in
// float and round once: bit for bit what the host computes from the same bf16 values. An odd
// count, so that the last value sits in the first half of a float's bytes.
TEST(CudaMathBf16, NativeImageOpsOnBf16ImagesRoundOnceAsTheHostDoes) {
  if (!cudnn_graph_api_compiled()) GTEST_SKIP() << "no cuDNN graph path in this build";
  const dlscale::testing::ScopedSetting images("DLSCALE_CUDA_IMAGE_ACTIVATIONS", "bf16");
  CudaDevice bf16(0, Precision::bf16, CudnnApi::graph);
  ASSERT_TRUE(bf16.context().native_is_bf16());
  MathOps<float>& math = bf16.math_float();
  constexpr std::size_t count = 10001;
  const auto bf16_bits = [](const std::vector<float>& values) {
    std::vector<std::uint16_t> bits(values.size());
    comm::round_to_bf16(values, bits);
    return bits;
  };
  const std::vector<std::uint16_t> a = bf16_bits(uniform_values<float>(count, -8, 8, 991)),
                                   b = bf16_bits(uniform_values<float>(count, -8, 8, 992)),
                                   dy = bf16_bits(uniform_values<float>(count, -1, 1, 993));
  auto a_device = upload(bf16, a), b_device = upload(bf16, b), dy_device = upload(bf16, dy);
  DeviceArray<std::uint16_t> out(bf16, count);
  const auto as_float = [](auto& array) { return reinterpret_cast<float*>(array.data()); };
  const auto value = [](std::uint16_t bits) { return comm::from_bf16(bits); };
  const auto expect_bits = [&](const char* what, const std::vector<std::uint16_t>& expected) {
    const std::vector<std::uint16_t> actual = download(bf16, out);
    std::size_t failures = 0;
    for (std::size_t i = 0; i < count; ++i)
      if (actual[i] != expected[i] && ++failures <= 3)
        ADD_FAILURE() << what << ": index " << i << ": bf16 bits " << std::hex << actual[i]
                      << " where " << expected[i] << " was expected" << std::dec;
    EXPECT_EQ(failures, 0u) << what;
  };

  math.native_image_add(count, as_float(a_device), as_float(b_device), as_float(out));
  std::vector<std::uint16_t> expected(count);
  for (std::size_t i = 0; i < count; ++i) expected[i] = comm::to_bf16(value(a[i]) + value(b[i]));
  expect_bits("add", expected);

  for (const float ceiling : {std::numeric_limits<float>::infinity(), 6.0f}) {
    const std::string name = ceiling == 6.0f ? "relu6" : "relu";
    math.native_image_relu_forward(count, ceiling, as_float(a_device), as_float(out));
    std::vector<std::uint16_t> relu(count);
    for (std::size_t i = 0; i < count; ++i)
      relu[i] = comm::to_bf16(std::min(std::max(value(a[i]), 0.0f), ceiling));
    expect_bits((name + " forward").c_str(), relu);
    // The gradient, from that output: dy where 0 < y < ceiling, else 0.
    auto y_device = upload(bf16, relu);
    math.native_image_relu_backward(count, ceiling, as_float(y_device), as_float(dy_device),
                                    as_float(out));
    for (std::size_t i = 0; i < count; ++i)
      expected[i] = value(relu[i]) > 0 && value(relu[i]) < ceiling ? dy[i] : comm::to_bf16(0.0f);
    expect_bits((name + " backward").c_str(), expected);
  }
}

// ---------------------------------------------------------------------------------------------
// Bias, column sums, element-wise

TYPED_TEST(CudaMathTest, AddRowBiasMatchesCpuExactly) {
  using T = TypeParam;
  for (int rows : {1, 7, 1024})
    for (int cols : {1, 10, 513}) {
      const auto y = uniform_values<T>(std::size_t(rows) * cols, -2, 2, 1);
      const auto bias = uniform_values<T>(cols, -1, 1, 2);
      const auto run = [&](Device& device) {
        auto device_y = upload(device, y);
        auto device_bias = upload(device, bias);
        device.math<T>().add_row_bias(rows, cols, device_bias.data(), device_y.data());
        return download(device, device_y);
      };
      expect_equal(describe("add_row_bias<", type_name<T>(), "> rows=", rows, " cols=", cols),
                   run(this->cpu()), run(this->gpu()));
    }
}

TYPED_TEST(CudaMathTest, ColumnSumsMatchCpu) {
  using T = TypeParam;
  for (int rows : {1, 7, 1024, 4099})
    for (int cols : {1, 10, 513}) {
      const auto dy = uniform_values<T>(std::size_t(rows) * cols, -1, 1, 3);
      std::vector<double> magnitude(cols, 0.0);
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
          magnitude[c] += std::abs(double(dy[std::size_t(r) * cols + c]));
      const auto run = [&](Device& device) {
        auto device_dy = upload(device, dy);
        DeviceArray<T> sums(device, cols);
        device.math<T>().column_sums(rows, cols, device_dy.data(), sums.data());
        return download(device, sums);
      };
      expect_close(describe("column_sums<", type_name<T>(), "> rows=", rows, " cols=", cols),
                   run(this->cpu()), run(this->gpu()),
                   [&](std::size_t c) { return sum_tolerance<T> * magnitude[c]; });
    }
}

// Inputs for ReLU: uniform in [-10, 10], with exact zeros and sixes (the ReLU6 edges) mixed in.
template <typename T>
std::vector<T> relu_inputs(std::size_t count) {
  auto x = uniform_values<T>(count, -10, 10, 4);
  for (std::size_t i = 0; i < count; i += 13) x[i] = T(0);
  for (std::size_t i = 5; i < count; i += 17) x[i] = T(6);
  return x;
}

TYPED_TEST(CudaMathTest, ReluForwardAndBackwardMatchCpuExactly) {
  using T = TypeParam;
  for (std::size_t count : {std::size_t(1), std::size_t(7), std::size_t(1000003)})
    for (T ceiling : {std::numeric_limits<T>::infinity(), T(6)}) {
      const auto x = relu_inputs<T>(count);
      const auto dy = uniform_values<T>(count, -1, 1, 5);
      const std::string what =
          describe("<", type_name<T>(), "> count=", count, " ceiling=", ceiling);
      const auto forward = [&](Device& device, bool in_place) {
        auto device_x = upload(device, x);
        DeviceArray<T> y(device, count);
        T* output = in_place ? device_x.data() : y.data();
        device.math<T>().relu_forward(count, ceiling, device_x.data(), output);
        return download(device, in_place ? device_x : y);
      };
      const auto y = forward(this->cpu(), false);
      expect_equal("relu_forward" + what, y, forward(this->gpu(), false));
      expect_equal("relu_forward in place" + what, y, forward(this->gpu(), true));

      const auto backward = [&](Device& device) {
        auto device_y = upload(device, y);
        auto device_dy = upload(device, dy);
        DeviceArray<T> dx(device, count);
        device.math<T>().relu_backward(count, ceiling, device_y.data(), device_dy.data(),
                                       dx.data());
        return download(device, dx);
      };
      expect_equal("relu_backward" + what, backward(this->cpu()), backward(this->gpu()));
    }
}

TYPED_TEST(CudaMathTest, AddMatchesCpuExactly) {
  using T = TypeParam;
  for (std::size_t count : {std::size_t(1), std::size_t(7), std::size_t(1000003)}) {
    const auto a = uniform_values<T>(count, -3, 3, 6);
    const auto b = uniform_values<T>(count, -3, 3, 7);
    const auto run = [&](Device& device, bool in_place) {
      auto device_a = upload(device, a);
      auto device_b = upload(device, b);
      DeviceArray<T> y(device, count);
      T* output = in_place ? device_a.data() : y.data();
      device.math<T>().add(count, device_a.data(), device_b.data(), output);
      return download(device, in_place ? device_a : y);
    };
    const auto expected = run(this->cpu(), false);
    const std::string what = describe("<", type_name<T>(), "> count=", count);
    expect_equal("add" + what, expected, run(this->gpu(), false));
    expect_equal("add in place" + what, expected, run(this->gpu(), true));
  }
}

TYPED_TEST(CudaMathTest, SigmoidForwardAndBackwardMatchCpu) {
  using T = TypeParam;
  for (std::size_t count : {std::size_t(1), std::size_t(7), std::size_t(100003)}) {
    auto x = uniform_values<T>(count, -20, 20, 8);
    const T extremes[] = {T(-800), T(-100), T(-88), T(-30), T(-1e-3), T(0), T(30), T(88), T(800)};
    for (std::size_t i = 0; i < std::size(extremes) && i < count; ++i) x[i] = extremes[i];
    const auto dy = uniform_values<T>(count, -1, 1, 9);
    const std::string what = describe("<", type_name<T>(), "> count=", count);

    const auto forward = [&](Device& device) {
      auto device_x = upload(device, x);
      DeviceArray<T> y(device, count);
      device.math<T>().sigmoid_forward(count, device_x.data(), y.data());
      return download(device, y);
    };
    const auto y = forward(this->cpu());
    expect_close("sigmoid_forward" + what, y, forward(this->gpu()), [&](std::size_t i) {
      return sigmoid_tolerance<T> * std::abs(double(y[i])) + flush_to_zero_floor<T>;
    });

    const auto backward = [&](Device& device) {
      auto device_y = upload(device, y);
      auto device_dy = upload(device, dy);
      DeviceArray<T> dx(device, count);
      device.math<T>().sigmoid_backward(count, device_y.data(), device_dy.data(), dx.data());
      return download(device, dx);
    };
    expect_equal("sigmoid_backward" + what, backward(this->cpu()), backward(this->gpu()));
  }
}

// ---------------------------------------------------------------------------------------------
// Embedding

TYPED_TEST(CudaMathTest, EmbeddingForwardMatchesCpuExactly) {
  using T = TypeParam;
  constexpr int vocabulary = 50;
  for (int rows : {1, 7, 1024})
    for (int width : {1, 7, 64}) {
      const auto ids = random_ids<T>(rows, vocabulary, 10);
      const auto table = uniform_values<T>(std::size_t(vocabulary) * width, -1, 1, 11);
      const auto run = [&](Device& device) {
        auto device_ids = upload(device, ids);
        auto device_table = upload(device, table);
        DeviceArray<T> y(device, std::size_t(rows) * width);
        device.math<T>().embedding_forward(rows, width, device_ids.data(), device_table.data(),
                                           y.data());
        return download(device, y);
      };
      expect_equal(
          describe("embedding_forward<", type_name<T>(), "> rows=", rows, " width=", width),
          run(this->cpu()), run(this->gpu()));
    }
}

template <typename T>
std::vector<T> run_embedding_backward(Device& device, int rows, int width, int vocabulary,
                                      const std::vector<T>& ids, const std::vector<T>& dy) {
  auto device_ids = upload(device, ids);
  auto device_dy = upload(device, dy);
  // Filled with garbage first: the call must zero the rows no id selects.
  auto gradient = upload(device, std::vector<T>(std::size_t(vocabulary) * width, T(123)));
  device.math<T>().embedding_backward(rows, width, vocabulary, device_ids.data(), device_dy.data(),
                                      gradient.data(), false);
  return download(device, gradient);
}

// Exact: the GPU adds each token's rows in row order from zero, as the CPU does.
TYPED_TEST(CudaMathTest, EmbeddingBackwardWithRepeatedIdsMatchesCpuExactly) {
  using T = TypeParam;
  struct Case {
    int rows, width, vocabulary;
    int distinct_ids;  // ids drawn from [0, distinct_ids): fewer means longer runs of repeats
  };
  const Case cases[] = {{1, 1, 1, 1},           {7, 33, 50, 50},    {1024, 64, 50, 50},
                        {1000, 17, 3, 3},       {2048, 40, 100, 1}, {8192, 512, 10000, 10000},
                        {8192, 512, 10000, 20}, {300, 1000, 40, 40}};
  std::uint64_t seed = 20;
  for (const Case& test : cases) {
    auto ids = random_ids<T>(test.rows, test.distinct_ids, seed++);
    if (test.distinct_ids == 1)
      for (T& id : ids) id = T(test.vocabulary / 2);  // every row the same token
    const auto dy = uniform_values<T>(std::size_t(test.rows) * test.width, -1, 1, seed++);
    expect_equal(
        describe("embedding_backward<", type_name<T>(), "> rows=", test.rows, " width=", test.width,
                 " vocabulary=", test.vocabulary, " distinct ids=", test.distinct_ids),
        run_embedding_backward(this->cpu(), test.rows, test.width, test.vocabulary, ids, dy),
        run_embedding_backward(this->gpu(), test.rows, test.width, test.vocabulary, ids, dy));
  }
}

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy

template <typename T>
struct SoftmaxResult {
  std::vector<T> dlogits;
  T loss;
};

template <typename T>
SoftmaxResult<T> run_softmax_cross_entropy(Device& device, int rows, int classes,
                                           const std::vector<T>& logits,
                                           const std::vector<std::int32_t>& labels) {
  auto device_logits = upload(device, logits);
  auto device_labels = upload(device, labels);
  DeviceArray<T> dlogits(device, logits.size());
  DeviceArray<T> loss(device, 1);
  device.math<T>().softmax_cross_entropy(rows, classes, device_logits.data(), device_labels.data(),
                                         dlogits.data(), loss.data());
  return {download(device, dlogits), download(device, loss)[0]};
}

// The mean cross-entropy in double, from the same logits: log(sum_c exp(z_c - max z)) -
// (z_label - max z), row by row. Also returns the scale its rounding grows with: the magnitudes
// that make each row's loss (the log of the sum, the label's logit and the largest logit).
template <typename T>
std::pair<double, double> exact_cross_entropy(int rows, int classes, const std::vector<T>& logits,
                                              const std::vector<std::int32_t>& labels) {
  double loss = 0, scale = 0;
  for (int r = 0; r < rows; ++r) {
    const T* z = logits.data() + std::size_t(r) * classes;
    const double max_logit = *std::max_element(z, z + classes);
    double exp_sum = 0;
    for (int c = 0; c < classes; ++c) exp_sum += std::exp(double(z[c]) - max_logit);
    const double log_sum = std::log(exp_sum);
    loss += log_sum - (double(z[labels[r]]) - max_logit);
    scale += std::abs(log_sum) + std::abs(double(z[labels[r]])) + std::abs(max_logit);
  }
  return {loss / rows, scale / rows};
}

// The exact dlogits, (softmax(z) - onehot(label)) / rows, from the same logits in long double (a
// 64-bit significand, 11 bits beyond double's), and the bound within which rounding in T keeps a
// correct kernel. With d = z - max z, S = sum_k exp(d_k) and q = exp(d) / S, all exact:
//   |dlogit - exact| <= eps (4 |exact| + q (probability_epsilons + |d| + log S + sum_k q_k |d_k|)
//                            / rows) + the smallest normal T.
// - 4 |exact|: the last roundings, the product by 1 / rows and the one-hot's subtraction.
// - probability_epsilons q: errors relative to the probability itself: the exponential, the sum
//   S, the division by it, and on the CPU oneDNN's vectorised log S, which is off by up to about
//   30 epsilons (its log 1 is 1.43e-6, 12 epsilons, where one class's dlogit is exactly 0: H200,
//   issue 30). Measured on these cases: the CPU needs 29 of the 48 in float, under 5 in double;
//   the GPU's arithmetic emulated on the host with glibc's expf, under 1.
// - q (|d| + log S): the exponent's argument (d, or the CPU's log-probability d - log S) rounded
//   to T, which moves e^d by eps |d| of itself; as q |d| <= q_max max(1, log classes), this is a
//   few epsilons of the row's largest probability. sum_k q_k |d_k|: the same, inside S.
// - the smallest normal T: a probability that underflows may be flushed to zero by oneDNN and
//   kept as a subnormal by CUDA, as the logistic is (flush_to_zero_floor).
// A kernel that does not subtract the max overflows (float at logit scale 100, double at 1000);
// a wrong sign, a missing 1 / rows or a missing one-hot is off by the value itself.
struct ExactSoftmaxGradient {
  std::vector<long double> dlogits;
  std::vector<double> tolerance;
};

template <typename T>
ExactSoftmaxGradient exact_softmax_gradient(int rows, int classes, const std::vector<T>& logits,
                                            const std::vector<std::int32_t>& labels) {
  static_assert(std::numeric_limits<long double>::digits >= 64, "long double must be wider");
  constexpr double probability_epsilons = 48;
  ExactSoftmaxGradient exact{std::vector<long double>(logits.size()),
                             std::vector<double>(logits.size())};
  std::vector<long double> distance(classes), probability(classes);  // |d| and q of a row
  for (int r = 0; r < rows; ++r) {
    const T* z = logits.data() + std::size_t(r) * classes;
    const long double max_logit = *std::max_element(z, z + classes);
    long double exp_sum = 0;
    for (int c = 0; c < classes; ++c) {
      distance[c] = max_logit - z[c];
      probability[c] = std::exp(-distance[c]);
      exp_sum += probability[c];
    }
    long double mean_distance = 0;  // sum_k q_k |d_k|
    for (int c = 0; c < classes; ++c) {
      probability[c] /= exp_sum;
      mean_distance += probability[c] * distance[c];
    }
    const long double log_sum = std::log(exp_sum);
    for (int c = 0; c < classes; ++c) {
      const std::size_t i = std::size_t(r) * classes + c;
      exact.dlogits[i] = (probability[c] - (c == labels[r] ? 1 : 0)) / rows;
      const double scale_of_probability =
          double(probability[c] * (probability_epsilons + distance[c] + log_sum + mean_distance)) /
          rows;
      exact.tolerance[i] =
          epsilon<T> * (4 * std::abs(double(exact.dlogits[i])) + scale_of_probability) +
          flush_to_zero_floor<T>;
    }
  }
  return exact;
}

// Fails naming `what`, `device` and the first few indices where |actual - exact| > tolerance.
template <typename T>
void expect_near_exact(const std::string& what, const std::string& device,
                       const std::vector<long double>& exact, const std::vector<T>& actual,
                       const std::vector<double>& tolerance) {
  ASSERT_EQ(exact.size(), actual.size()) << what;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const double difference = double(std::abs(actual[i] - exact[i]));
    if (difference <= tolerance[i]) continue;  // NaN fails
    if (++failures <= 5)
      ADD_FAILURE() << std::setprecision(17) << what << ": index " << i << ": " << device << " "
                    << actual[i] << ", exact " << double(exact[i]) << " (difference " << difference
                    << ", tolerance " << tolerance[i] << ")";
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << exact.size() << " values on the "
                          << device << " beyond rounding";
}

std::vector<std::int32_t> random_labels(int rows, int classes, std::uint64_t stream) {
  std::vector<std::int32_t> labels(rows);
  const auto ids = random_ids<double>(rows, classes, stream);
  for (int r = 0; r < rows; ++r) labels[r] = std::int32_t(ids[r]);
  return labels;
}

TYPED_TEST(CudaMathTest, SoftmaxCrossEntropyMatchesCpu) {
  using T = TypeParam;
  std::uint64_t seed = 40;
  for (int rows : {1, 7, 1024})
    for (int classes : {1, 10, 1000})
      // 100: many probabilities underflow, and exp(z) overflows float without the max taken
      // off; 1000: it overflows double.
      for (double logit_scale : {1.0, 30.0, 100.0, 1000.0}) {
        const auto logits =
            uniform_values<T>(std::size_t(rows) * classes, -logit_scale, logit_scale, seed++);
        const auto labels = random_labels(rows, classes, seed++);
        const auto on_cpu = run_softmax_cross_entropy(this->cpu(), rows, classes, logits, labels);
        const auto on_gpu = run_softmax_cross_entropy(this->gpu(), rows, classes, logits, labels);
        const std::string what = describe("<", type_name<T>(), "> rows=", rows,
                                          " classes=", classes, " logit scale=", logit_scale);
        // Against the exact dlogits, not the CPU's: oneDNN's float log-softmax is off by up to
        // 30 epsilons of the largest probability, the GPU by about 1 (H200, issue 30).
        const auto exact = exact_softmax_gradient(rows, classes, logits, labels);
        expect_near_exact("softmax_cross_entropy dlogits" + what, "GPU", exact.dlogits,
                          on_gpu.dlogits, exact.tolerance);
        expect_near_exact("softmax_cross_entropy dlogits" + what, "CPU", exact.dlogits,
                          on_cpu.dlogits, exact.tolerance);
        // The loss against the exact one, not the CPU's: the CPU's float loss comes from
        // oneDNN's vectorised log-softmax, whose log(1) is -1.43e-6 where the exact loss of one
        // class is 0 (the GPU's was 0: H200, issue 30). Both round z - max z in T first.
        const auto [exact_loss, loss_scale] = exact_cross_entropy(rows, classes, logits, labels);
        expect_close("softmax_cross_entropy loss" + what, std::vector<double>{exact_loss},
                     std::vector<double>{double(on_gpu.loss)}, [&](std::size_t) {
                       return softmax_tolerance<T> * (std::abs(exact_loss) + loss_scale) +
                              8 * epsilon<T> + underflow_floor<T>;
                     });
      }
}

// An fp32 device made with DLSCALE_CUDA_BATCHED_LOADS set to `batched_loads` (nullptr: unset).
std::unique_ptr<CudaDevice> fp32_device_with_loads(const char* batched_loads) {
  const dlscale::testing::ScopedSetting setting("DLSCALE_CUDA_BATCHED_LOADS", batched_loads);
  return std::make_unique<CudaDevice>(0, Precision::fp32);
}

// DLSCALE_CUDA_BATCHED_LOADS takes no or yes (the default), is recorded as the device property
// batched_loads and in changed_settings where no, and refuses anything else in one line before
// the device is made.
TEST(CudaMathSettings, BatchedLoadsIsNoOrYes) {
  const dlscale::testing::DefaultGpuSettings defaults;
  for (const char* yes : {static_cast<const char*>(nullptr), "yes"}) {
    const auto device = fp32_device_with_loads(yes);
    EXPECT_TRUE(device->context().batched_loads) << (yes ? yes : "unset");
    EXPECT_EQ(device_property(*device, "changed_settings"), "absent") << (yes ? yes : "unset");
    EXPECT_EQ(device_property(*device, "batched_loads"), "yes") << (yes ? yes : "unset");
  }
  const auto one_at_a_time = fp32_device_with_loads("no");
  EXPECT_FALSE(one_at_a_time->context().batched_loads);
  EXPECT_EQ(device_property(*one_at_a_time, "changed_settings"), "batched_loads no");
  EXPECT_EQ(device_property(*one_at_a_time, "batched_loads"), "no");
  const dlscale::testing::ScopedSetting bad("DLSCALE_CUDA_BATCHED_LOADS", "4");
  try {
    const CudaDevice refused(0, Precision::fp32);
    ADD_FAILURE() << "DLSCALE_CUDA_BATCHED_LOADS=4 was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(
        std::string(error.what()).rfind("DLSCALE_CUDA_BATCHED_LOADS: unknown batched loads '4'", 0),
        0u)
        << error.what();
  }
}

// DLSCALE_CUDA_BATCHED_LOADS=yes (four reads in flight per thread) changes no bit of the softmax
// cross-entropy: each thread visits its columns in the same order. Rows shorter than a block,
// longer by a part of a batch, GPT-2's 50,257 words, a label past the classes (a NaN loss row).
TYPED_TEST(CudaMathTest, SoftmaxCrossEntropyBatchedLoadsChangeNoBit) {
  using T = TypeParam;
  const auto batched_device = fp32_device_with_loads("yes");
  const auto plain_device = fp32_device_with_loads("no");
  ASSERT_TRUE(batched_device->context().batched_loads);
  ASSERT_FALSE(plain_device->context().batched_loads);
  std::uint64_t seed = 90;
  for (const auto [rows, classes] : {std::pair{1, 1}, std::pair{7, 10}, std::pair{33, 255},
                                     std::pair{5, 1000}, std::pair{3, 1025}, std::pair{4, 50257}}) {
    const auto logits = uniform_values<T>(std::size_t(rows) * classes, -30, 30, seed++);
    auto labels = random_labels(rows, classes, seed++);
    if (rows > 1) labels[1] = classes;  // no such class: that row's loss is NaN on both
    const auto plain = run_softmax_cross_entropy(*plain_device, rows, classes, logits, labels);
    const auto batched = run_softmax_cross_entropy(*batched_device, rows, classes, logits, labels);
    const std::string what = describe("<", type_name<T>(), "> rows=", rows, " classes=", classes);
    expect_bit_identical("softmax_cross_entropy dlogits, batched loads" + what, plain.dlogits,
                         batched.dlogits);
    expect_bit_identical("softmax_cross_entropy loss, batched loads" + what,
                         std::vector<T>{plain.loss}, std::vector<T>{batched.loss});
  }
}

// The element-wise kernels that DLSCALE_CUDA_BATCHED_LOADS=yes gives four reads in flight per
// thread (the dense layer's bias, the residual add, in place too, and GELU both ways): the same
// results bit for bit, over counts below one grid-stride pass, past a whole number of batches,
// and beyond one wave of the grid.
TYPED_TEST(CudaMathTest, ElementwiseBatchedLoadsChangeNoBit) {
  using T = TypeParam;
  const auto batched_device = fp32_device_with_loads("yes");
  const auto plain_device = fp32_device_with_loads("no");
  ASSERT_TRUE(batched_device->context().batched_loads);
  ASSERT_FALSE(plain_device->context().batched_loads);
  std::uint64_t seed = 110;
  for (const auto [rows, cols] : {std::pair{1, 3}, std::pair{37, 1000}, std::pair{4099, 2304}}) {
    const std::size_t count = std::size_t(rows) * cols;
    const std::string what = describe("<", type_name<T>(), "> rows=", rows, " cols=", cols);
    const auto x = uniform_values<T>(count, -4, 4, seed++);
    const auto dy = uniform_values<T>(count, -1, 1, seed++);
    const auto bias = uniform_values<T>(std::size_t(cols), -1, 1, seed++);
    // Every kernel on one device, each result downloaded.
    const auto run = [&](Device& device) {
      MathOps<T>& math = device.math<T>();
      std::vector<std::vector<T>> results;
      auto y = upload(device, x);
      auto d_bias = upload(device, bias);
      math.add_row_bias(rows, cols, d_bias.data(), y.data());
      results.push_back(download(device, y));
      auto d_dy = upload(device, dy), sum = upload(device, x);
      math.add(count, sum.data(), d_dy.data(), sum.data());  // in place, as a residual add may be
      results.push_back(download(device, sum));
      auto d_x = upload(device, x);
      DeviceArray<T> out(device, count);
      math.add(count, d_x.data(), d_dy.data(), out.data());
      results.push_back(download(device, out));
      math.gelu_forward(count, d_x.data(), out.data());
      results.push_back(download(device, out));
      math.gelu_backward(count, d_x.data(), d_dy.data(), out.data());
      results.push_back(download(device, out));
      return results;
    };
    const auto plain = run(*plain_device), batched = run(*batched_device);
    const char* names[] = {"add_row_bias", "add in place", "add", "gelu_forward", "gelu_backward"};
    ASSERT_EQ(plain.size(), std::size(names));
    for (std::size_t k = 0; k < plain.size(); ++k)
      expect_bit_identical(std::string(names[k]) + ", batched loads" + what, plain[k], batched[k]);
    // And the bias really was added (a kernel that wrote nothing would agree with itself too).
    EXPECT_EQ(plain[0][count - 1], x[count - 1] + bias[std::size_t(cols) - 1]) << what;
  }
}

// ---------------------------------------------------------------------------------------------
// The transformer's element-wise kernels: layer norm, GELU, the causal softmax. Each row's sums
// run in another order on the GPU, and tanh and exp differ by an ulp or two: relative to the
// scale of what made each value, a few hundred ulp of float (rows of up to 1,024 values).

template <typename T>
constexpr double row_tolerance = std::is_same_v<T, float> ? 2e-5 : 1e-12;

// Both ways of summing the scale and shift gradients: by 32 x 32 tiles (the default; 4,099 rows:
// not a multiple of the tiles' 32 row lanes; 40 columns: a partial second tile), and one thread
// per column (DLSCALE_CUDA_LAYER_NORM_GRADIENT=serial).
TYPED_TEST(CudaMathTest, LayerNormForwardAndBackwardMatchCpu) {
  using T = TypeParam;
  const auto device_with = [](const char* gradient) {
    const dlscale::testing::ScopedSetting setting("DLSCALE_CUDA_LAYER_NORM_GRADIENT", gradient);
    return std::make_unique<CudaDevice>(0, Precision::fp32);
  };
  const auto tiled_device = device_with(nullptr);
  const auto serial_device = device_with("serial");
  CudaDevice& tiled = *tiled_device;
  ASSERT_TRUE(tiled.context().tiled_layer_norm_gradient);
  ASSERT_FALSE(serial_device->context().tiled_layer_norm_gradient);
  for (const auto& [rows, width] :
       {std::pair{1, 1}, std::pair{3, 7}, std::pair{257, 768}, std::pair{4099, 40}}) {
    const std::size_t count = std::size_t(rows) * width;
    const auto x = uniform_values<T>(count, -3, 5, 31);
    const auto scale_shift = uniform_values<T>(2 * std::size_t(width), -2, 2, 32);
    const auto dy = uniform_values<T>(count, -1, 1, 33);
    const std::string what = describe("<", type_name<T>(), "> rows=", rows, " width=", width);
    const auto run = [&](Device& device) {
      auto device_x = upload(device, x), device_scale_shift = upload(device, scale_shift),
           device_dy = upload(device, dy);
      DeviceArray<T> y(device, count), mean(device, rows), variance(device, rows),
          dx(device, count), scale_shift_gradient(device, 2 * std::size_t(width));
      auto& math = device.math<T>();
      math.layer_norm_forward(rows, width, device_x.data(), device_scale_shift.data(), y.data(),
                              mean.data(), variance.data());
      math.layer_norm_backward(rows, width, device_x.data(), device_scale_shift.data(), mean.data(),
                               variance.data(), device_dy.data(), dx.data(),
                               scale_shift_gradient.data());
      return std::tuple{download(device, y), download(device, dx),
                        download(device, scale_shift_gradient)};
    };
    const auto [y, dx, dscale] = run(this->cpu());
    const auto [gpu_y, gpu_dx, gpu_dscale] = run(tiled);
    const auto [serial_y, serial_dx, serial_dscale] = run(*serial_device);
    EXPECT_EQ(serial_y, gpu_y) << "layer_norm_forward" << what << ": the setting changed it";
    EXPECT_EQ(serial_dx, gpu_dx) << "layer_norm_backward dx" << what << ": the setting changed it";
    expect_close(what + ": layer_norm_backward dscale, serial", dscale, serial_dscale,
                 [&](std::size_t) { return row_tolerance<T> * 4 * rows; });
    // Normalised values are O(1) times the scale, plus the shift.
    expect_close("layer_norm_forward" + what, y, gpu_y, [&](std::size_t i) {
      return row_tolerance<T> * (std::abs(double(scale_shift[i % width])) * 4 +
                                 std::abs(double(scale_shift[width + i % width])) + 1);
    });
    expect_close("layer_norm_backward dx" + what, dx, gpu_dx,
                 [&](std::size_t) { return row_tolerance<T> * 8 * std::sqrt(double(width)); });
    // Column sums over the rows.
    expect_close("layer_norm_backward dscale" + what, dscale, gpu_dscale,
                 [&](std::size_t) { return row_tolerance<T> * 4 * rows; });
  }
}

TYPED_TEST(CudaMathTest, GeluForwardAndBackwardMatchCpu) {
  using T = TypeParam;
  for (std::size_t count : {std::size_t(1), std::size_t(7), std::size_t(100003)}) {
    const auto x = uniform_values<T>(count, -12, 12, 41);
    const auto dy = uniform_values<T>(count, -1, 1, 42);
    const std::string what = describe("<", type_name<T>(), "> count=", count);
    const auto run = [&](Device& device) {
      auto device_x = upload(device, x), device_dy = upload(device, dy);
      DeviceArray<T> y(device, count), dx(device, count);
      device.math<T>().gelu_forward(count, device_x.data(), y.data());
      device.math<T>().gelu_backward(count, device_x.data(), device_dy.data(), dx.data());
      return std::pair{download(device, y), download(device, dx)};
    };
    const auto [y, dx] = run(this->cpu());
    const auto [gpu_y, gpu_dx] = run(this->gpu());
    expect_close("gelu_forward" + what, y, gpu_y,
                 [&](std::size_t i) { return 8 * epsilon<T> * (std::abs(double(x[i])) + 1); });
    expect_close("gelu_backward" + what, dx, gpu_dx, [&](std::size_t i) {
      return 16 * epsilon<T> * (std::abs(double(x[i])) + 1) * std::abs(double(dy[i])) +
             underflow_floor<T>;
    });
  }
}

TYPED_TEST(CudaMathTest, CausalSoftmaxMatchesCpuAndMasksTheFuture) {
  using T = TypeParam;
  for (const auto& [heads, rows] : {std::pair{1, 1}, std::pair{3, 5}, std::pair{2, 1024}}) {
    const std::size_t count = std::size_t(heads) * rows * rows;
    const auto scores = uniform_values<T>(count, -30, 30, 51);
    const auto dp = uniform_values<T>(count, -1, 1, 52);
    const std::string what = describe("<", type_name<T>(), "> heads=", heads, " rows=", rows);
    const auto run = [&](Device& device) {
      auto p = upload(device, scores), gradient = upload(device, dp);
      device.math<T>().causal_softmax_forward(heads, rows, p.data());
      device.math<T>().causal_softmax_backward(heads, rows, p.data(), gradient.data());
      return std::pair{download(device, p), download(device, gradient)};
    };
    const auto [p, ds] = run(this->cpu());
    const auto [gpu_p, gpu_ds] = run(this->gpu());
    for (int h = 0; h < heads; ++h)
      for (int r = 0; r < rows; ++r)
        for (int c = r + 1; c < rows; ++c)
          ASSERT_EQ(gpu_p[(std::size_t(h) * rows + r) * rows + c], T(0))
              << what << ": head " << h << " row " << r << " sees " << c;
    expect_close("causal_softmax_forward" + what, p, gpu_p, [&](std::size_t i) {
      return sigmoid_tolerance<T> * 4 * std::abs(double(p[i])) + underflow_floor<T>;
    });
    expect_close("causal_softmax_backward" + what, ds, gpu_ds,
                 [&](std::size_t) { return row_tolerance<T>; });
  }
}

// ---------------------------------------------------------------------------------------------
// SGD with momentum

TYPED_TEST(CudaMathTest, SgdMomentumUpdateMatchesCpu) {
  using T = TypeParam;
  const T learning_rate = T(0.05), momentum = T(0.9), gradient_scale = T(0.25);
  for (std::size_t count : {std::size_t(1), std::size_t(7), std::size_t(1000003)})
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {  // 1: not 16-byte aligned
      if (offset >= count) continue;
      const auto gradient = uniform_values<T>(count, -2, 2, 60);
      const auto velocity = uniform_values<T>(count, -1, 1, 61);
      const auto parameters = uniform_values<T>(count, -1, 1, 62);
      struct Result {
        std::vector<T> velocity, parameters;
        double squared_norm = 0, unscaled_squared_norm = 0;
      };
      const auto run = [&](Device& device) {
        auto device_gradient = upload(device, gradient);
        auto device_velocity = upload(device, velocity);
        auto device_parameters = upload(device, parameters);
        DeviceArray<std::int32_t> nonfinite(device, 1);
        nonfinite.copy_from_host(std::vector<std::int32_t>{0});
        DeviceArray<double> norms(device, 2);
        norms.copy_from_host(std::vector<double>{-1, -1});  // must be overwritten, not added to
        device.math<T>().squared_norm(count - offset, device_gradient.data() + offset,
                                      norms.data() + 1);
        device.math<T>().sgd_momentum_update(
            count - offset, learning_rate, momentum, gradient_scale,
            device_gradient.data() + offset, device_velocity.data() + offset,
            device_parameters.data() + offset, nonfinite.data(), norms.data());
        EXPECT_EQ(nonfinite.to_host().front(), 0) << "finite gradients raised the flag";
        const auto norm_values = norms.to_host();
        return Result{download(device, device_velocity), download(device, device_parameters),
                      norm_values[0], norm_values[1]};
      };
      const Result expected = run(this->cpu());
      const Result actual = run(this->gpu());
      // The magnitude of the terms of v and p: v = momentum v + scale g; p -= rate v.
      const auto velocity_terms = [&](std::size_t i) {
        return std::abs(double(momentum) * velocity[i]) +
               std::abs(double(gradient_scale) * gradient[i]);
      };
      const std::string what = describe("<", type_name<T>(), "> count=", count, " offset=", offset);
      expect_close("sgd_momentum_update velocity" + what, expected.velocity, actual.velocity,
                   [&](std::size_t i) { return sgd_tolerance<T> * velocity_terms(i); });
      expect_close("sgd_momentum_update parameters" + what, expected.parameters, actual.parameters,
                   [&](std::size_t i) {
                     return sgd_tolerance<T> * (std::abs(double(parameters[i])) +
                                                double(learning_rate) * velocity_terms(i));
                   });
      // Both sum positive terms in double, in different orders (the GPU's blocks add atomically).
      EXPECT_NEAR(actual.squared_norm, expected.squared_norm, 1e-12 * expected.squared_norm)
          << "the update's gradient norm" << what;
      EXPECT_NEAR(actual.unscaled_squared_norm, expected.unscaled_squared_norm,
                  1e-12 * expected.unscaled_squared_norm)
          << "squared_norm" << what;
      EXPECT_NEAR(expected.squared_norm,
                  double(gradient_scale) * double(gradient_scale) * expected.unscaled_squared_norm,
                  1e-6 * expected.squared_norm)
          << "the update's norm is of the scaled gradient" << what;
    }
}

// ---------------------------------------------------------------------------------------------
// AdamW

// One AdamW step from the same state on both devices, at steps t = 1, 2 and 3 (the device's
// counter set to t - 1 first), so each bias correction is checked on its own.
TYPED_TEST(CudaMathTest, AdamWUpdateMatchesCpu) {
  using T = TypeParam;
  const T learning_rate = T(0.01), gradient_scale = T(0.25);
  const AdamWHyperparameters<T> hyperparameters{.weight_decay = T(0.1)};
  for (std::int64_t t : {1, 2, 3})
    for (std::size_t count : {std::size_t(1), std::size_t(7), std::size_t(1000003)})
      for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {  // 1: not 16-byte aligned
        if (offset >= count) continue;
        const auto gradient = uniform_values<T>(count, -2, 2, 80 + t);
        const auto first_moment = uniform_values<T>(count, -1, 1, 84);
        const auto second_moment = uniform_values<T>(count, 0, 1, 85);
        const auto parameters = uniform_values<T>(count, -1, 1, 86);
        struct Result {
          std::vector<T> first_moment, second_moment, parameters;
          std::int64_t step_count = 0;
          double squared_norm = 0;
        };
        const auto run = [&](Device& device) {
          auto device_gradient = upload(device, gradient);
          auto device_first_moment = upload(device, first_moment);
          auto device_second_moment = upload(device, second_moment);
          auto device_parameters = upload(device, parameters);
          auto step_count = upload(device, std::vector<std::int64_t>{t - 1});
          auto nonfinite = upload(device, std::vector<std::int32_t>{0});
          auto norm = upload(device, std::vector<double>{-1});  // overwritten, not added to
          device.math<T>().adamw_update(
              count - offset, learning_rate, hyperparameters, gradient_scale,
              device_gradient.data() + offset, device_first_moment.data() + offset,
              device_second_moment.data() + offset, device_parameters.data() + offset,
              step_count.data(), nonfinite.data(), norm.data());
          EXPECT_EQ(download(device, nonfinite).front(), 0) << "finite gradients raised the flag";
          return Result{download(device, device_first_moment),
                        download(device, device_second_moment), download(device, device_parameters),
                        download(device, step_count).front(), download(device, norm).front()};
        };
        const Result expected = run(this->cpu());
        const Result actual = run(this->gpu());
        const std::string what =
            describe("<", type_name<T>(), "> t=", t, " count=", count, " offset=", offset);
        EXPECT_EQ(actual.step_count, t) << "the step counter" << what;
        EXPECT_EQ(expected.step_count, t) << "the CPU's step counter" << what;
        // The magnitudes of the terms of m = beta1 m + (1 - beta1) g and of v likewise: the GPU
        // fuses multiply-adds, the CPU rounds each product.
        const double beta1 = hyperparameters.beta1, beta2 = hyperparameters.beta2;
        const auto scaled = [&](std::size_t i) { return double(gradient_scale) * gradient[i]; };
        const auto first_moment_terms = [&](std::size_t i) {
          return std::abs(beta1 * first_moment[i]) + (1 - beta1) * std::abs(scaled(i));
        };
        expect_close("adamw_update first moment" + what, expected.first_moment, actual.first_moment,
                     [&](std::size_t i) { return sgd_tolerance<T> * first_moment_terms(i); });
        expect_close("adamw_update second moment" + what, expected.second_moment,
                     actual.second_moment, [&](std::size_t i) {
                       return sgd_tolerance<T> *
                              (beta2 * second_moment[i] + (1 - beta2) * scaled(i) * scaled(i));
                     });
        // p = p (1 - rate decay) - rate / (1 - beta1^t) m / (sqrt(v) / sqrt(1 - beta2^t) + eps):
        // the moment's error carried through the step, a few roundings of each term, and pow,
        // sqrt and division, which may differ by an ulp between CUDA and glibc.
        const double step_size = double(learning_rate) / (1 - std::pow(beta1, double(t)));
        const double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, double(t)));
        expect_close("adamw_update parameters" + what, expected.parameters, actual.parameters,
                     [&](std::size_t i) {
                       const double denominator =
                           std::sqrt(double(expected.second_moment[i])) / bias_correction2_sqrt +
                           double(hyperparameters.epsilon);
                       return 4 * sgd_tolerance<T> *
                              (std::abs(double(parameters[i])) +
                               step_size * first_moment_terms(i) / denominator);
                     });
        EXPECT_NEAR(actual.squared_norm, expected.squared_norm, 1e-12 * expected.squared_norm)
            << "the update's gradient norm" << what;
      }
}

// Steps are captured once and replayed: the step number must come from device memory, so that
// each replay applies the next bias correction. One eager step, then a graph of two steps
// replayed twice with a new gradient each time (t = 1 to 5), against five eager steps on the CPU.
TYPED_TEST(CudaMathTest, AdamWReplaysOfACapturedStepCountTheirSteps) {
  using T = TypeParam;
  const std::size_t count = 4099;  // packs and a tail
  const T learning_rate = T(0.01), gradient_scale = T(0.5);
  const AdamWHyperparameters<T> hyperparameters{};
  const auto parameters = uniform_values<T>(count, -1, 1, 90);
  const std::vector<std::vector<T>> gradients = {uniform_values<T>(count, -2, 2, 91),
                                                 uniform_values<T>(count, -2, 2, 92),
                                                 uniform_values<T>(count, -2, 2, 93)};
  struct State {
    State(Device& device, const std::vector<T>& initial)
        : parameters(upload(device, initial)),
          first_moment(upload(device, std::vector<T>(initial.size(), T(0)))),
          second_moment(upload(device, std::vector<T>(initial.size(), T(0)))),
          gradient(device, initial.size()),
          step_count(upload(device, std::vector<std::int64_t>{0})),
          nonfinite(upload(device, std::vector<std::int32_t>{0})),
          norm(device, 1) {}
    DeviceArray<T> parameters, first_moment, second_moment, gradient;
    DeviceArray<std::int64_t> step_count;
    DeviceArray<std::int32_t> nonfinite;
    DeviceArray<double> norm;
  };
  const auto step = [&](Device& device, State& state) {
    device.math<T>().adamw_update(
        count, learning_rate, hyperparameters, gradient_scale, state.gradient.data(),
        state.first_moment.data(), state.second_moment.data(), state.parameters.data(),
        state.step_count.data(), state.nonfinite.data(), state.norm.data());
  };

  Device& cpu = this->cpu();
  State expected(cpu, parameters);
  for (int gradient_index : {0, 1, 1, 2, 2}) {
    expected.gradient.copy_from_host(gradients[gradient_index]);
    step(cpu, expected);
  }

  CudaDevice& gpu = this->gpu();
  State actual(gpu, parameters);
  actual.gradient.copy_from_host(gradients[0]);
  step(gpu, actual);  // eager, as the training loop's first step
  const std::unique_ptr<CapturedWork> two_steps = gpu.capture([&] {
    step(gpu, actual);
    step(gpu, actual);
  });
  ASSERT_NE(two_steps, nullptr) << "the capture failed";
  EXPECT_EQ(download(gpu, actual.step_count).front(), 1) << "capturing ran the steps";
  for (int gradient_index : {1, 2}) {
    actual.gradient.copy_from_host(gradients[gradient_index]);  // waits for the stream
    two_steps->replay();
  }

  const std::string what = describe("<", type_name<T>(), ">");
  EXPECT_EQ(download(gpu, actual.step_count).front(), 5) << "steps counted" << what;
  EXPECT_EQ(download(gpu, actual.nonfinite).front(), 0) << "finite gradients raised the flag";
  // Five steps of at most about the learning rate each, against the CPU's: a replay with a
  // stale step number misses by a large fraction of the learning rate.
  expect_close("adamw_update parameters after replays" + what, download(cpu, expected.parameters),
               download(gpu, actual.parameters), [&](std::size_t i) {
                 return 64 * epsilon<T> * 5 * (std::abs(double(parameters[i])) + 1);
               });
  EXPECT_NEAR(download(gpu, actual.norm).front(), download(cpu, expected.norm).front(),
              1e-12 * download(cpu, expected.norm).front())
      << "the last replay's gradient norm" << what;
}

// ---------------------------------------------------------------------------------------------
// Determinism: the reductions give the same bits every run (no atomics, fixed order)

TYPED_TEST(CudaMathTest, ReductionsAreBitReproducible) {
  using T = TypeParam;
  CudaDevice& gpu = this->gpu();
  auto& math = gpu.math<T>();

  {
    constexpr int rows = 8192, cols = 512;
    auto dy = upload(gpu, uniform_values<T>(std::size_t(rows) * cols, -1, 1, 70));
    DeviceArray<T> sums(gpu, cols);
    math.column_sums(rows, cols, dy.data(), sums.data());
    const auto first = download(gpu, sums);
    math.column_sums(rows, cols, dy.data(), sums.data());
    expect_bit_identical(describe("column_sums<", type_name<T>(), ">"), first, download(gpu, sums));
  }
  {
    constexpr int rows = 8192, width = 512, vocabulary = 10000;
    auto host_ids = random_ids<T>(rows, vocabulary, 71);
    for (int r = 0; r < rows; r += 2) host_ids[r] = T(3);  // one long run, as padding makes
    auto ids = upload(gpu, host_ids);
    auto dy = upload(gpu, uniform_values<T>(std::size_t(rows) * width, -1, 1, 72));
    DeviceArray<T> gradient(gpu, std::size_t(vocabulary) * width);
    math.embedding_backward(rows, width, vocabulary, ids.data(), dy.data(), gradient.data(), false);
    const auto first = download(gpu, gradient);
    math.embedding_backward(rows, width, vocabulary, ids.data(), dy.data(), gradient.data(), false);
    expect_bit_identical(describe("embedding_backward<", type_name<T>(), ">"), first,
                         download(gpu, gradient));
  }
  {
    constexpr int rows = 8192, classes = 1000;
    auto logits = upload(gpu, uniform_values<T>(std::size_t(rows) * classes, -8, 8, 73));
    auto labels = upload(gpu, random_labels(rows, classes, 74));
    DeviceArray<T> dlogits(gpu, std::size_t(rows) * classes);
    DeviceArray<T> loss(gpu, 1);
    math.softmax_cross_entropy(rows, classes, logits.data(), labels.data(), dlogits.data(),
                               loss.data());
    const auto first_dlogits = download(gpu, dlogits);
    const auto first_loss = download(gpu, loss);
    math.softmax_cross_entropy(rows, classes, logits.data(), labels.data(), dlogits.data(),
                               loss.data());
    expect_bit_identical(describe("softmax_cross_entropy dlogits<", type_name<T>(), ">"),
                         first_dlogits, download(gpu, dlogits));
    expect_bit_identical(describe("softmax_cross_entropy loss<", type_name<T>(), ">"), first_loss,
                         download(gpu, loss));
  }
}

}  // namespace
}  // namespace dlscale::kernels
