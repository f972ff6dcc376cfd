// The Device seam: a device owns memory, one compute stream, timing events and the math kernels.
// Layers, the optimizer and the training loop reach the hardware only through this interface.
// Work is queued in order on the compute stream (on the CPU it simply runs); events mark points
// in that stream, so phases and layers are timed without stopping the device after each one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/enum_names.hpp"
#include "kernels/image_kernels.hpp"
#include "kernels/sequence_kernels.hpp"

namespace dlscale::kernels {

enum class Transpose { no, yes };

// AdamW's constants, with torch.optim.AdamW's defaults: the decay rates of the first and second
// moment averages (betas), the term that keeps the step's denominator above zero, and the
// decoupled weight decay (a fraction of the learning rate, not a gradient term).
template <typename T>
struct AdamWHyperparameters {
  T beta1 = T(0.9);
  T beta2 = T(0.999);
  T epsilon = T(1e-8);
  T weight_decay = T(0.01);
};

// The math a training step needs, for one scalar type. Training runs in float; the gradient
// checks run the very same layers in double. All pointers are device memory, row-major.
template <typename T>
class MathOps {
 public:
  virtual ~MathOps() = default;

  // c[m x n] = alpha * op(a) * op(b) + beta * c.
  virtual void gemm(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, T alpha,
                    const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc) = 0;
  // `count` GEMMs c_i = alpha * op(a_i) * op(b_i) + beta * c_i with x_i = x + i * stride_x: the
  // heads of an attention layer in one call. This loops over gemm(); a device whose library
  // multiplies a strided batch in one call (oneDNN's matmul, cuBLAS) overrides it.
  virtual void gemm_strided_batched(Transpose transpose_a, Transpose transpose_b, int m, int n,
                                    int k, T alpha, const T* a, int lda, std::ptrdiff_t stride_a,
                                    const T* b, int ldb, std::ptrdiff_t stride_b, T beta, T* c,
                                    int ldc, std::ptrdiff_t stride_c, int count) {
    for (int i = 0; i < count; ++i)
      gemm(transpose_a, transpose_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
           beta, c + i * stride_c, ldc);
  }
  // y[r][c] += bias[c] for every row r.
  virtual void add_row_bias(int rows, int cols, const T* bias, T* y) = 0;
  // sums[c] = sum over r of dy[r][c].
  virtual void column_sums(int rows, int cols, const T* dy, T* sums) = 0;

  // y = x W^T + b over `rows` rows of `inputs` values to `outputs` (a dense layer's forward; W is
  // [outputs x inputs], b null for none). In one call so that a device can add the bias inside
  // its GEMM (the GPU's cuBLASLt epilogue); this default is the GEMM and then add_row_bias.
  virtual void linear_forward(int rows, int inputs, int outputs, const T* x, const T* weights,
                              const T* bias, T* y) {
    gemm(Transpose::no, Transpose::yes, rows, outputs, inputs, T(1), x, inputs, weights, inputs,
         T(0), y, outputs);
    if (bias != nullptr) add_row_bias(rows, outputs, bias, y);
  }

  // The backward of y = x W^T + b over `rows` rows of `inputs` values to `outputs` (a dense
  // layer's, an output head's; W is [outputs x inputs]): weight_gradient = dy^T x, bias_gradient
  // = dy's column sums unless null, input_gradient = dy W unless null. In one call so that a
  // device whose GEMMs read converted copies (bf16 on the GPU) converts dy once for both GEMMs
  // and sums the bias in that same pass; this default makes the three calls one by one.
  virtual void linear_backward(int rows, int inputs, int outputs, const T* x, const T* weights,
                               const T* output_gradient, T* weight_gradient, T* bias_gradient,
                               T* input_gradient) {
    gemm(Transpose::yes, Transpose::no, outputs, inputs, rows, T(1), output_gradient, outputs, x,
         inputs, T(0), weight_gradient, inputs);
    if (bias_gradient != nullptr) column_sums(rows, outputs, output_gradient, bias_gradient);
    if (input_gradient != nullptr)
      gemm(Transpose::no, Transpose::no, rows, inputs, outputs, T(1), output_gradient, outputs,
           weights, inputs, T(0), input_gradient, inputs);
  }

  // y = min(max(x, 0), ceiling): ReLU with an infinite ceiling, ReLU6 with 6. In place is fine.
  virtual void relu_forward(std::size_t count, T ceiling, const T* x, T* y) = 0;
  // dx = dy where the forward output y is strictly between 0 and the ceiling, else 0.
  virtual void relu_backward(std::size_t count, T ceiling, const T* y, const T* dy, T* dx) = 0;
  // y = a + b, element-wise. y may be a or b.
  virtual void add(std::size_t count, const T* a, const T* b, T* y) = 0;

  // The three above on images in ImageLayout::native (a residual block's sum, its ReLU and their
  // gradients; a ReLU6 between image layers), which a device may hold in an element type of its
  // own: the GPU's graph path keeps them in bf16 where DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16, as
  // autocast does. The pointers are then the network's buffers, read as that type. Where native
  // images hold T, as on the CPU, these are the ops above.
  virtual void native_image_relu_forward(std::size_t count, T ceiling, const T* x, T* y) {
    relu_forward(count, ceiling, x, y);
  }
  virtual void native_image_relu_backward(std::size_t count, T ceiling, const T* y, const T* dy,
                                          T* dx) {
    relu_backward(count, ceiling, y, dy, dx);
  }
  virtual void native_image_add(std::size_t count, const T* a, const T* b, T* y) {
    add(count, a, b, y);
  }

  virtual void sigmoid_forward(std::size_t count, const T* x, T* y) = 0;
  // dx = dy * y * (1 - y), from the forward output y.
  virtual void sigmoid_backward(std::size_t count, const T* y, const T* dy, T* dx) = 0;

  // Embedding lookup: y[r] = table[ids[r]] for `rows` token ids (stored as T, exact below 2^24).
  virtual void embedding_forward(int rows, int width, const T* ids, const T* table, T* y) = 0;
  // table_gradient[ids[r]] += dy[r] for every row, after table_gradient = 0 unless
  // add_to_gradient (a table tied to an output head already holds the head's part).
  virtual void embedding_backward(int rows, int width, int vocabulary, const T* ids, const T* dy,
                                  T* table_gradient, bool add_to_gradient) = 0;

  // Layer normalization of each row of `width` values (Ba, Kiros and Hinton 2016), as
  // torch.nn.LayerNorm with epsilon 1e-5: y = (x - mean) / sqrt(variance + epsilon) * scale +
  // shift, variance biased. scale_shift: [2 x width], the scales then the shifts. Keeps each row's
  // mean and variance (rows values each) for the backward.
  virtual void layer_norm_forward(int rows, int width, const T* x, const T* scale_shift, T* y,
                                  T* mean, T* variance) = 0;
  // Writes dx and overwrites scale_shift_gradient ([2 x width]), from what the forward kept.
  virtual void layer_norm_backward(int rows, int width, const T* x, const T* scale_shift,
                                   const T* mean, const T* variance, const T* dy, T* dx,
                                   T* scale_shift_gradient) = 0;

  // GELU in the tanh form GPT-2 trained with (Hendrycks and Gimpel 2016; PyTorch's
  // approximate='tanh'): y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). In place is fine.
  virtual void gelu_forward(std::size_t count, const T* x, T* y) = 0;
  // dx = dy * gelu'(x), from the forward input x.
  virtual void gelu_backward(std::size_t count, const T* x, const T* dy, T* dx) = 0;

  // Causal attention weights of `heads` heads, in place on their [heads x rows x rows] scores:
  // row i of each becomes the softmax of its first i + 1 scores (a position attends to itself
  // and the positions before it) and zeros after them.
  virtual void causal_softmax_forward(int heads, int rows, T* scores) = 0;
  // In place, from the forward's probabilities p: the gradient dp of the weights becomes that of
  // the scores, ds = p * (dp - sum over the row of p * dp) (zero after the diagonal, as p is).
  virtual void causal_softmax_backward(int heads, int rows, const T* probabilities,
                                       T* gradient) = 0;

  // Mean softmax cross-entropy of `rows` samples, written to loss[0] in device memory (so a step
  // never waits for the host). Also writes dlogits = (softmax(logits) - onehot(labels)) / rows,
  // the gradient of that mean.
  virtual void softmax_cross_entropy(int rows, int classes, const T* logits,
                                     const std::int32_t* labels, T* dlogits, T* loss) = 0;

  // Heavy-ball SGD as PyTorch defines it, with the gradient scaled first (1/ranks averages an
  // allreduced sum): v = momentum * v + scale * g; p -= learning_rate * v. Sets
  // *nonfinite_gradient (device memory) to 1 if any gradient is NaN or infinite, and never clears
  // it: the pass over the gradients is already paid for, so divergence is caught for free.
  // Where squared_norm is not null, also writes the squared L2 norm of the scaled gradient,
  // sum of (scale * g)^2, to it (device memory, accumulated in double): the global gradient's
  // norm for the gradient noise scale, from the same pass.
  virtual void sgd_momentum_update(std::size_t count, T learning_rate, T momentum, T gradient_scale,
                                   const T* gradient, T* velocity, T* parameters,
                                   std::int32_t* nonfinite_gradient, double* squared_norm) = 0;

  // AdamW as torch.optim.AdamW defines it (Loshchilov and Hutter, "Decoupled Weight Decay
  // Regularization", 2019), in one pass, with g = gradient_scale * gradient:
  //   p *= 1 - learning_rate * weight_decay;
  //   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2;
  //   p -= learning_rate / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon).
  // The step number t lives in device memory: the call adds 1 to *step_count first and uses the
  // sum, in the stream, so a captured step replayed N times counts N steps. The flag and the
  // optional norm are sgd_momentum_update's.
  virtual void adamw_update(std::size_t count, T learning_rate,
                            const AdamWHyperparameters<T>& hyperparameters, T gradient_scale,
                            const T* gradient, T* first_moment, T* second_moment, T* parameters,
                            std::int64_t* step_count, std::int32_t* nonfinite_gradient,
                            double* squared_norm) = 0;

  // *squared_norm = sum of x[i]^2 (device memory, accumulated in double): a rank's own gradient
  // norm, read before its gradients are summed across ranks.
  virtual void squared_norm(std::size_t count, const T* x, double* squared_norm) = 0;
};

// A point in the device's compute stream. Made by Device::make_event(), marked by record().
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
};

// Work recorded once and replayed many times (a CUDA graph): one launch instead of hundreds,
// for steps whose shapes and buffers never change.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  virtual void replay() = 0;  // queued on the compute stream, like any other work
};

// How float math may round. tf32 lets GEMMs and convolutions use TF32 tensor cores (10-bit
// mantissa products, float accumulation), as PyTorch's allow_tf32 does; bf16 feeds GEMMs and
// convolutions bf16 copies of their inputs and weights (8-bit mantissa products, float
// accumulation and outputs), as PyTorch's autocast does for them, while parameters, gradients,
// the loss, normalization and the update stay float; fp32 forbids both.
enum class Precision { fp32, tf32, bf16 };

// As --precision and results files spell them.
inline constexpr EnumNames<Precision, 3> precision_names{{"fp32", "tf32", "bf16"}};
inline const char* precision_name(Precision precision) { return precision_names(precision); }

// Named facts about the device (model, driver and library versions, clocks), written with every
// run so a result names the hardware and software it measured.
using DeviceProperties = std::vector<std::pair<std::string, std::string>>;
// The property that names the library the device's GEMMs run on, and its version: the run's
// `blas` attribute.
inline constexpr const char* blas_property = "blas";

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string description() const = 0;  // the hardware model
  virtual DeviceProperties properties() const = 0;
  virtual int compute_threads() const = 0;
  // Device memory free now, for the refusal of runs that would not fit.
  virtual std::size_t free_memory_bytes() const = 0;
  // True when device memory is host memory (MPI can sum it in place).
  virtual bool memory_is_host() const = 0;
  // The CUDA ordinal of the GPU this device drew, for NVML; -1 on a device that has none.
  virtual int gpu_index() const { return -1; }

  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* pointer) noexcept = 0;
  virtual void copy_to_device(void* device_destination, const void* host_source,
                              std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_destination, const void* device_source,
                            std::size_t bytes) = 0;
  // Device memory to device memory, queued on the compute stream like a kernel (so it may be
  // captured into a step); the buffers must not overlap.
  virtual void copy_on_device(void* destination, const void* source, std::size_t bytes) = 0;

  // Waits until all queued work is done.
  virtual void synchronize() = 0;

  virtual std::unique_ptr<DeviceEvent> make_event() = 0;
  // Marks the point the compute stream has reached (inside a capture too).
  virtual void record(DeviceEvent& event) = 0;
  // Seconds from `from` to `to`, both recorded; waits until `to` has been reached.
  virtual double elapsed_seconds(const DeviceEvent& from, const DeviceEvent& to) = 0;
  // Blocks the calling host thread until the stream has reached `event`.
  virtual void wait(const DeviceEvent& event) = 0;

  // Records what `work` queues instead of running it, or returns null where the device cannot
  // (the CPU runs everything as it is called). Nothing may wait for the host during `work`.
  virtual std::unique_ptr<CapturedWork> capture(const std::function<void()>& work) = 0;

  // Image layers, float only (in ImageLayout::native a device may hold another element type:
  // MathOps::native_image_add); each layer makes its own kernel.
  virtual std::unique_ptr<ConvolutionKernel> make_convolution(
      const ConvolutionGeometry& geometry) = 0;
  virtual std::unique_ptr<PoolingKernel> make_pooling(const PoolingGeometry& geometry) = 0;
  virtual std::unique_ptr<BatchNormKernel> make_batch_norm(const BatchNormGeometry& geometry) = 0;
  // An LSTM layer's kernel; for a stack (geometry.layers > 1) only where runs_lstm_stacks().
  virtual std::unique_ptr<LstmKernel> make_lstm(const LstmGeometry& geometry) = 0;
  // Whether make_lstm takes a stack of layers and runs it as one: a library that overlaps one
  // layer's steps with the next one's (cuDNN's multi-layer RNN, as PyTorch's nn.LSTM runs it).
  // Elsewhere a workload builds its stack of one-layer LSTMs.
  virtual bool runs_lstm_stacks() const { return false; }
  // A fused causal attention, or none (the default): the layer then composes it from GEMMs and
  // the causal softmax, as the CPU always does.
  virtual std::unique_ptr<AttentionKernel> make_attention(const AttentionGeometry& /*geometry*/) {
    return nullptr;
  }

  virtual MathOps<float>& math_float() = 0;
  virtual MathOps<double>& math_double() = 0;

  template <typename T>
  MathOps<T>& math() {
    if constexpr (std::is_same_v<T, float>)
      return math_float();
    else
      return math_double();
  }
};

}  // namespace dlscale::kernels
