// dlscale-bench-cudnn-lstm: where issue 30's lstm-64 gap to PyTorch may come from, measured on
// cuDNN alone. dlscale trains an LSTM stack as one cuDNN call per layer and pass, on batch-major
// sequences (kernels/cuda/cudnn_lstm_kernel.cpp); PyTorch's nn.LSTM(num_layers=L) makes one call
// for the whole stack, on sequence-major data, where cuDNN may run layer l + 1's step t beside
// layer l's step t + 1. This times the four combinations at each precision, on random data:
//   per-layer batch-major   (dlscale's way)      per-layer seq-major
//   stacked batch-major                          stacked seq-major   (PyTorch's way)
// Each pass (forward in training mode, backward data, backward weights) is timed with CUDA events
// around each cuDNN call, --iters times after --warmup; the table gives each pass's median, the
// median of the three together, and that total against the per-layer batch-major one's. Only the
// cuDNN calls are timed (with the clearing of the weight gradient before its pass, as dlscale
// clears it): not dlscale's weight transposes, its bf16 rounding of the sequences or the loss,
// which are the same for every variant. bf16 needs cuDNN 9.13 or later (its row says so where
// the cuDNN is older).
//   usage: dlscale-bench-cudnn-lstm [--steps 64] [--batch 1024] [--hidden 512] [--layers 2]
//          [--precisions fp32,tf32,bf16] [--iters 20] [--warmup 3]
//   (the defaults are lstm-64 at batch 1024; lstm-32 at batch 128: --steps 32 --batch 128)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "kernels/cuda/cudnn_support.hpp"
#include "kernels/device.hpp"

namespace {

using namespace dlscale::kernels;
namespace po = boost::program_options;

struct Options {
  int steps = 64, batch = 1024, hidden = 512, layers = 2, iters = 20, warmup = 3;
  std::vector<std::string> precisions{"fp32", "tf32", "bf16"};
};

// What dlscale's CudnnLstm asks of cuDNN at each --precision: float data with float products
// (fp32) or TF32 tensor cores (tf32), or bf16 data with float math on tensor cores (bf16).
struct PrecisionChoice {
  cudnnDataType_t data_type;
  cudnnMathType_t math;
  std::size_t element_bytes;
};

PrecisionChoice precision_choice(const std::string& name) {
  const auto precision = precision_names.named(name);
  if (!precision)
    throw std::invalid_argument("--precisions: unknown '" + name + "' (fp32, tf32, bf16)");
  switch (*precision) {
    case Precision::fp32:
      return {CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, sizeof(float)};
    case Precision::tf32:
      return {CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, sizeof(float)};
    case Precision::bf16:
      break;
  }
  return {CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_OP_MATH, sizeof(__nv_bfloat16)};
}

// `count` values uniform in [-limit, limit] in the precision's data type, in device memory.
DeviceBuffer random_buffer(std::size_t count, const PrecisionChoice& precision, float limit,
                           std::mt19937& generator) {
  std::uniform_real_distribution<float> uniform(-limit, limit);
  DeviceBuffer buffer(count * precision.element_bytes);
  if (precision.data_type == CUDNN_DATA_BFLOAT16) {
    std::vector<__nv_bfloat16> values(count);
    for (auto& value : values) value = __float2bfloat16(uniform(generator));
    DLSCALE_CUDA_CHECK(cudaMemcpy(buffer.data(), values.data(), buffer.size(), cudaMemcpyDefault));
  } else {
    std::vector<float> values(count);
    for (auto& value : values) value = uniform(generator);
    DLSCALE_CUDA_CHECK(cudaMemcpy(buffer.data(), values.data(), buffer.size(), cudaMemcpyDefault));
  }
  return buffer;
}

// One cuDNN LSTM of `layers` layers (inputs -> hidden, then hidden -> hidden), single input bias
// per gate, zero initial state, its sequences in `layout`; with its weights, their gradient, and
// the workspace and reserve space of training.
class Lstm {
 public:
  Lstm(cudnnHandle_t cudnn, const Options& o, int inputs, int layers,
       const PrecisionChoice& precision, cudnnRNNDataLayout_t layout, std::mt19937& generator)
      : cudnn_(cudnn), layers_(layers) {
    DLSCALE_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_, cudnn, 0.0f, nullptr, 0, 0));
    DLSCALE_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn_, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_SINGLE_INP_BIAS, CUDNN_UNIDIRECTIONAL,
        CUDNN_LINEAR_INPUT, precision.data_type, CUDNN_DATA_FLOAT, precision.math, inputs, o.hidden,
        o.hidden, layers, dropout_, CUDNN_RNN_PADDED_IO_ENABLED));
    const std::vector<int> lengths(std::size_t(o.batch), o.steps);
    DLSCALE_CUDNN_CHECK(cudnnSetRNNDataDescriptor(x_, precision.data_type, layout, o.steps, o.batch,
                                                  inputs, lengths.data(), nullptr));
    DLSCALE_CUDNN_CHECK(cudnnSetRNNDataDescriptor(y_, precision.data_type, layout, o.steps, o.batch,
                                                  o.hidden, lengths.data(), nullptr));
    const int dimensions[3] = {layers, o.batch, o.hidden};
    const int strides[3] = {o.batch * o.hidden, o.hidden, 1};
    DLSCALE_CUDNN_CHECK(
        cudnnSetTensorNdDescriptor(state_, precision.data_type, 3, dimensions, strides));
    lengths_ = DeviceBuffer(lengths.size() * sizeof(std::int32_t));
    DLSCALE_CUDA_CHECK(
        cudaMemcpy(lengths_.data(), lengths.data(), lengths_.size(), cudaMemcpyHostToDevice));
    std::size_t weight_bytes = 0, workspace_bytes = 0, reserve_bytes = 0;
    DLSCALE_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(cudnn, rnn_, &weight_bytes));
    DLSCALE_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(cudnn, rnn_, CUDNN_FWD_MODE_TRAINING, x_,
                                                  &workspace_bytes, &reserve_bytes));
    // As PyTorch initialises an LSTM: U(-a, a), a = 1 / sqrt(hidden).
    weights_ = random_buffer(weight_bytes / precision.element_bytes, precision,
                             1.0f / float(std::sqrt(double(o.hidden))), generator);
    weight_gradients_ = DeviceBuffer(weight_bytes);
    workspace_ = DeviceBuffer(workspace_bytes);
    reserve_ = DeviceBuffer(reserve_bytes);
  }

  void forward(const void* x, void* y) {
    DLSCALE_CUDNN_CHECK(cudnnRNNForward(
        cudnn_, rnn_, CUDNN_FWD_MODE_TRAINING, lengths_.as<std::int32_t>(), x_, x, y_, y, state_,
        nullptr, nullptr, state_, nullptr, nullptr, weights_.size(), weights_.data(),
        workspace_.size(), workspace_.data(), reserve_.size(), reserve_.data()));
  }
  void backward_data(const void* y, const void* dy, void* dx) {
    DLSCALE_CUDNN_CHECK(cudnnRNNBackwardData_v8(
        cudnn_, rnn_, lengths_.as<std::int32_t>(), y_, y, dy, x_, dx, state_, nullptr, nullptr,
        nullptr, state_, nullptr, nullptr, nullptr, weights_.size(), weights_.data(),
        workspace_.size(), workspace_.data(), reserve_.size(), reserve_.data()));
  }
  // Overwrites the gradient, as dlscale does: cleared, then added into.
  void backward_weights(const void* x, const void* y, cudaStream_t stream) {
    DLSCALE_CUDA_CHECK(
        cudaMemsetAsync(weight_gradients_.data(), 0, weight_gradients_.size(), stream));
    DLSCALE_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
        cudnn_, rnn_, CUDNN_WGRAD_MODE_ADD, lengths_.as<std::int32_t>(), x_, x, state_, nullptr, y_,
        y, weight_gradients_.size(), weight_gradients_.data(), workspace_.size(), workspace_.data(),
        reserve_.size(), reserve_.data()));
  }
  int layers() const { return layers_; }

 private:
  cudnnHandle_t cudnn_;
  int layers_;
  DropoutDescriptor dropout_;
  RnnDescriptor rnn_;
  RnnDataDescriptor x_, y_;
  TensorDescriptor state_;
  DeviceBuffer lengths_, weights_, weight_gradients_, workspace_, reserve_;
};

// Milliseconds between two events recorded on the stream, summed over a pass's calls.
class PassTimer {
 public:
  explicit PassTimer(cudaStream_t stream) : stream_(stream) {}
  ~PassTimer() {
    for (auto event : events_) cudaEventDestroy(event);
  }
  PassTimer(const PassTimer&) = delete;
  PassTimer& operator=(const PassTimer&) = delete;
  // Times `call` (queued on the stream) into pass `pass`.
  template <typename Call>
  void time(int pass, Call&& call) {
    cudaEvent_t start = event(), stop = event();
    DLSCALE_CUDA_CHECK(cudaEventRecord(start, stream_));
    call();
    DLSCALE_CUDA_CHECK(cudaEventRecord(stop, stream_));
    timed_.push_back({pass, start, stop});
  }
  // Waits for the calls timed since the last collect and adds each one's time to its pass.
  void collect(double* pass_milliseconds) {
    DLSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (const auto& t : timed_) {
      float milliseconds = 0;
      DLSCALE_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, t.start, t.stop));
      pass_milliseconds[t.pass] += milliseconds;
      spare_.push_back(t.start);
      spare_.push_back(t.stop);
    }
    timed_.clear();
  }

 private:
  struct Timed {
    int pass;
    cudaEvent_t start, stop;
  };
  cudaEvent_t event() {
    if (!spare_.empty()) {
      cudaEvent_t e = spare_.back();
      spare_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    DLSCALE_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
    return e;
  }
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_, spare_;
  std::vector<Timed> timed_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

struct Variant {
  const char* name;
  bool stacked;
  cudnnRNNDataLayout_t layout;
};

constexpr Variant variants[] = {
    {"per-layer batch-major (dlscale)", false, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED},
    {"per-layer seq-major", false, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED},
    {"stacked batch-major", true, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED},
    {"stacked seq-major (PyTorch)", true, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED},
};

// The medians of forward, backward data, backward weights and their sum, in ms.
struct PassMedians {
  double forward, data, weights, total;
};

PassMedians time_variant(cudnnHandle_t cudnn, cudaStream_t stream, const Options& o,
                         const PrecisionChoice& precision, const Variant& variant) {
  std::mt19937 generator(2026);
  // The stack: one cuDNN LSTM of all layers, or one per layer (the first from the inputs, which
  // are as wide as the hidden state here, as lstm-64's 512-wide embedding is).
  std::vector<std::unique_ptr<Lstm>> stack;
  const int calls = variant.stacked ? 1 : o.layers;
  for (int call = 0; call < calls; ++call)
    stack.push_back(std::make_unique<Lstm>(cudnn, o, o.hidden, variant.stacked ? o.layers : 1,
                                           precision, variant.layout, generator));
  // Sequences between the calls: x, each call's y, the top's dy, and each call's dx.
  const std::size_t sequence = std::size_t(o.batch) * o.steps * o.hidden;
  const float activation_limit = 1.0f;
  std::vector<DeviceBuffer> activations, gradients;
  activations.push_back(random_buffer(sequence, precision, activation_limit, generator));
  for (int call = 0; call < calls; ++call) {
    activations.emplace_back(sequence * precision.element_bytes);
    gradients.emplace_back(sequence * precision.element_bytes);
  }
  const DeviceBuffer top_gradient = random_buffer(sequence, precision, 1e-3f, generator);

  PassTimer timer(stream);
  std::vector<double> forward, data, weights, total;
  for (int iteration = 0; iteration < o.warmup + o.iters; ++iteration) {
    for (int call = 0; call < calls; ++call)
      timer.time(0, [&] {
        stack[std::size_t(call)]->forward(activations[std::size_t(call)].data(),
                                          activations[std::size_t(call) + 1].data());
      });
    // Backward, top call first, each call's data before its weights (which read what data left
    // in the reserve space), as dlscale's network runs them.
    for (int call = calls - 1; call >= 0; --call) {
      const auto c = std::size_t(call);
      const void* dy = call == calls - 1 ? top_gradient.data() : gradients[c + 1].data();
      timer.time(
          1, [&] { stack[c]->backward_data(activations[c + 1].data(), dy, gradients[c].data()); });
      timer.time(2, [&] {
        stack[c]->backward_weights(activations[c].data(), activations[c + 1].data(), stream);
      });
    }
    double passes[3] = {0, 0, 0};
    timer.collect(passes);
    if (iteration < o.warmup) continue;
    forward.push_back(passes[0]);
    data.push_back(passes[1]);
    weights.push_back(passes[2]);
    total.push_back(passes[0] + passes[1] + passes[2]);
  }
  return {median(forward), median(data), median(weights), median(total)};
}

Options parse(int argc, char** argv) {
  Options o;
  std::string precisions = "fp32,tf32,bf16";
  po::options_description described(
      "dlscale-bench-cudnn-lstm: one cuDNN call per LSTM layer (dlscale) against one call for the "
      "stack (PyTorch), batch-major against sequence-major, per precision");
  described.add_options()("help,h", "this text")(
      "steps", po::value(&o.steps)->default_value(o.steps), "sequence length")(
      "batch", po::value(&o.batch)->default_value(o.batch), "sequences per batch")(
      "hidden", po::value(&o.hidden)->default_value(o.hidden), "inputs and hidden units")(
      "layers", po::value(&o.layers)->default_value(o.layers), "LSTM layers in the stack")(
      "precisions", po::value(&precisions)->default_value(precisions),
      "comma-separated: fp32, tf32, bf16")("iters", po::value(&o.iters)->default_value(o.iters),
                                           "timed repetitions")(
      "warmup", po::value(&o.warmup)->default_value(o.warmup), "untimed repetitions first");
  po::variables_map values;
  po::store(po::parse_command_line(argc, argv, described), values);
  if (values.count("help")) {
    std::cout << described << "\n";
    std::exit(0);
  }
  po::notify(values);
  for (const auto& [name, value] : {std::pair{"--steps", o.steps},
                                    {"--batch", o.batch},
                                    {"--hidden", o.hidden},
                                    {"--layers", o.layers},
                                    {"--iters", o.iters}})
    if (value < 1) throw std::invalid_argument(fmt::format("{} must be at least 1", name));
  if (o.warmup < 0) throw std::invalid_argument("--warmup must not be negative");
  o.precisions.clear();
  std::stringstream list(precisions);
  for (std::string name; std::getline(list, name, ',');) {
    precision_choice(name);  // refuses an unknown name here, before any GPU work
    o.precisions.push_back(name);
  }
  if (o.precisions.empty()) throw std::invalid_argument("--precisions: none given");
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  cudaDeviceProp properties{};
  DLSCALE_CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
  cudaStream_t stream = nullptr;
  DLSCALE_CUDA_CHECK(cudaStreamCreate(&stream));
  cudnnHandle_t cudnn = nullptr;
  DLSCALE_CUDNN_CHECK(cudnnCreate(&cudnn));
  DLSCALE_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
  fmt::print(
      "# cuDNN LSTM, {} layers of {}, {} steps, batch {}: {}, cuDNN {}; median of {} after "
      "{}\n\n",
      o.layers, o.hidden, o.steps, o.batch, properties.name, cudnnGetVersion(), o.iters, o.warmup);
  fmt::print(
      "| precision | variant | forward ms | backward data ms | backward weights ms | total ms "
      "| dlscale's total / this |\n|---|---|---:|---:|---:|---:|---:|\n");
  for (const auto& name : o.precisions) {
    const PrecisionChoice precision = precision_choice(name);
    constexpr std::size_t first_cudnn_with_bf16_rnn = 91300;  // as kernels/cuda/cudnn_lstm_kernel
    if (precision.data_type == CUDNN_DATA_BFLOAT16 &&
        cudnnGetVersion() < first_cudnn_with_bf16_rnn) {
      fmt::print("| {} | not run: cuDNN {} has no bf16 RNN (9.13 and later) | | | | | |\n", name,
                 cudnnGetVersion());
      continue;
    }
    double baseline = 0;
    for (const Variant& variant : variants) {
      const PassMedians m = time_variant(cudnn, stream, o, precision, variant);
      if (baseline == 0) baseline = m.total;
      fmt::print("| {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.2f} |\n", name, variant.name,
                 m.forward, m.data, m.weights, m.total, baseline / m.total);
      std::fflush(stdout);
    }
  }
  cudnnDestroy(cudnn);
  cudaStreamDestroy(stream);
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "dlscale-bench-cudnn-lstm: %s\n", error.what());
  return 1;
}
