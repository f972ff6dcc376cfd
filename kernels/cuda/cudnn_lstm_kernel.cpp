// cuDNN LSTM on the v8 RNN API: one layer, or a stack of them in one call
// (DLSCALE_CUDNN_LSTM_STACK, cuda_context.hpp: cuDNN may then run one layer's step beside the
// next layer's), left to right, zero initial state, batch-major sequences, one bias per gate.
// dlscale's parameters are, per layer, W_x [inputs x 4 x hidden], W_h [hidden x 4 x hidden] and b
// [4 x hidden]; cuDNN keeps, per layer and gate, a row-major [hidden x inputs] (or [hidden x
// hidden]) matrix and a bias vector in its own weight space. Forward transposes the parameters in
// and backward transposes the weight gradient out, with cuBLAS geam on the same stream: eight small
// transposes next to the recurrent GEMMs. Under --precision bf16 (where cuDNN offers bf16
// RNNs, 9.13 and later, and the setting below asks for it), the sequences and the weight space are
// bf16 and cuDNN computes in float, as PyTorch's autocast runs its cuDNN LSTM: the transposes go
// through a float copy of the weight space, which one kernel rounds in (and widens the gradient out
// of); dlscale's parameters, their gradients and the update stay float.
#include "kernels/cuda/cudnn_lstm_kernel.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cstdlib>

#include "core/errors.hpp"
#include "core/printable_text.hpp"
#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/cudnn_support.hpp"

namespace dlscale::kernels {

namespace {

constexpr int gates = 4;  // i, f, g, o in dlscale and in cuDNN (linear layers 0-3 and 4-7)

// cuDNN runs RNNs on bf16 sequences and weights (with float math) from 9.13 on (PyTorch enabled
// its bf16 cuDNN RNN for that release: pytorch/pytorch#164411).
constexpr std::size_t first_cudnn_with_bf16_rnn = 91300;

// Whether the LSTM runs in bf16 under --precision bf16: by default, as autocast runs its cuDNN
// LSTM and as the CPU does, since it ran on an H200 (2026-11-26: within 1% of the CPU's float in
// the kernel tests, lstm-64 batch 1024 at 23.5 ms a step against float's 57.0; docs/gpu.md).
// DLSCALE_CUDNN_LSTM=float keeps the float LSTM.
enum class LstmSetting { float_lstm, bf16_lstm };
constexpr EnumNames<LstmSetting, 2> lstm_setting_names{{"float", "bf16"}};  // DLSCALE_CUDNN_LSTM

bool lstm_in_bf16(const CudaContext& context) {
  const char* setting = std::getenv("DLSCALE_CUDNN_LSTM");
  const std::string asked =
      setting == nullptr ? lstm_setting_names(LstmSetting::bf16_lstm) : setting;
  const auto named = lstm_setting_names.named(asked);
  if (!named)
    throw UserError("DLSCALE_CUDNN_LSTM='" + printable(asked.substr(0, 40)) +
                    "': expected float or bf16");
  return *named == LstmSetting::bf16_lstm && context.precision == Precision::bf16 &&
         cudnnGetVersion() >= first_cudnn_with_bf16_rnn;
}

class CudnnLstm final : public LstmKernel {
 public:
  CudnnLstm(const CudaContext& context, const LstmGeometry& geometry)
      : context_(context), geometry_(geometry), in_bf16_(lstm_in_bf16(context)) {
    const auto& g = geometry_;
    data_type_ = in_bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    element_bytes_ = in_bf16_ ? sizeof(__nv_bfloat16) : sizeof(float);
    // No dropout between a stack's layers (nor any in one layer); cuDNN still wants a
    // descriptor, so one with rate 0 (which needs no random state).
    DLSCALE_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_, context_.cudnn, 0.0f, nullptr, 0, 0));
    // One bias per gate (CUDNN_RNN_SINGLE_INP_BIAS), as dlscale, oneDNN and the reference have;
    // cuDNN's default double bias would add a second, recurrent one. Padded I/O is what allows
    // the unpacked (batch-major) data layout. bf16 data: float math on tensor cores.
    DLSCALE_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn_, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_SINGLE_INP_BIAS, CUDNN_UNIDIRECTIONAL,
        CUDNN_LINEAR_INPUT, data_type_, CUDNN_DATA_FLOAT,
        in_bf16_ ? CUDNN_TENSOR_OP_MATH : context_.cudnn_math(), g.inputs, g.hidden,
        /*projSize=*/g.hidden, /*numLayers=*/g.layers, dropout_, CUDNN_RNN_PADDED_IO_ENABLED));
    std::size_t weight_bytes = 0;
    DLSCALE_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(context_.cudnn, rnn_, &weight_bytes));
    weights_ = DeviceBuffer(weight_bytes);
    weight_gradients_ = DeviceBuffer(weight_bytes);
    // The transposes' float copy of the weight space, element for element (bf16 only; in float
    // they write the weight space itself).
    if (in_bf16_) float_space_ = DeviceBuffer(weight_bytes / element_bytes_ * sizeof(float));
    // Whatever forward does not write (there should be nothing) stays zero.
    DLSCALE_CUDA_CHECK(cudaMemsetAsync(weights_.data(), 0, weight_bytes, context_.stream));
    if (in_bf16_)
      DLSCALE_CUDA_CHECK(
          cudaMemsetAsync(float_space_.data(), 0, float_space_.size(), context_.stream));
    locate_gate_parameters();
  }

  void forward(int batch, const float* x, const float* parameters, float* y) override {
    Plan& p = plan_for(batch);
    copy_parameters_in(parameters);
    const void* input = x;
    void* output = y;
    if (in_bf16_) {  // kept for backward: the staging's regions are reused by the next call
      round_to_bf16(x, p.input_bf16.as<__nv_bfloat16>(), sequence_count(batch, geometry_.inputs),
                    context_.stream, context_.batched_loads);
      input = p.input_bf16.data();
      output = p.output_bf16.data();
    }
    // Null hx and cx: the zero initial state. Null hy and cy: the final state is not wanted.
    DLSCALE_CUDNN_CHECK(cudnnRNNForward(
        context_.cudnn, rnn_, CUDNN_FWD_MODE_TRAINING, p.sequence_lengths.as<std::int32_t>(),
        p.input, input, p.output, output, p.state, nullptr, nullptr, p.state, nullptr, nullptr,
        weights_.size(), weights_.data(), p.workspace.size(), p.workspace.data(), p.reserve.size(),
        p.reserve.data()));
    if (in_bf16_)
      widen_to_float(p.output_bf16.as<__nv_bfloat16>(), y, sequence_count(batch, geometry_.hidden),
                     context_.stream, context_.batched_loads);
  }

  // Runs against the weight space and reserve space of the last forward(), which the network
  // always calls with these same parameters just before.
  void backward(int batch, const float* x, const float* /*parameters*/, const float* y,
                const float* output_gradient, float* input_gradient,
                float* parameter_gradient) override {
    Plan& p = plan_for(batch);
    // cuDNN reads the sequences in its data type: under bf16, the copies forward kept and the
    // output gradient rounded here.
    const void* input = x;
    const void* output = y;
    const void* output_bf16_gradient = output_gradient;
    void* data_gradient = input_gradient;
    if (in_bf16_) {
      round_to_bf16(output_gradient, p.output_gradient_bf16.as<__nv_bfloat16>(),
                    sequence_count(batch, geometry_.hidden), context_.stream,
                    context_.batched_loads);
      input = p.input_bf16.data();
      output = p.output_bf16.data();
      output_bf16_gradient = p.output_gradient_bf16.data();
      data_gradient = p.input_gradient_bf16.data();
    } else if (data_gradient == nullptr) {  // cuDNN always writes it; a first layer discards it
      if (p.discarded_gradient.size() == 0) {
        require_not_capturing(context_.stream, "cuDNN LSTM");
        p.discarded_gradient =
            DeviceBuffer(sequence_count(batch, geometry_.inputs) * sizeof(float));
      }
      data_gradient = p.discarded_gradient.data();
    }
    // Data first: it fills the reserve space that the weight gradient then reads.
    DLSCALE_CUDNN_CHECK(cudnnRNNBackwardData_v8(
        context_.cudnn, rnn_, p.sequence_lengths.as<std::int32_t>(), p.output, output,
        output_bf16_gradient, p.input, data_gradient, p.state, nullptr, nullptr, nullptr, p.state,
        nullptr, nullptr, nullptr, weights_.size(), weights_.data(), p.workspace.size(),
        p.workspace.data(), p.reserve.size(), p.reserve.data()));
    if (in_bf16_ && input_gradient != nullptr)
      widen_to_float(p.input_gradient_bf16.as<__nv_bfloat16>(), input_gradient,
                     sequence_count(batch, geometry_.inputs), context_.stream,
                     context_.batched_loads);
    // cuDNN adds weight gradients into its buffer (CUDNN_WGRAD_MODE_ADD); dlscale overwrites.
    DLSCALE_CUDA_CHECK(
        cudaMemsetAsync(weight_gradients_.data(), 0, weight_gradients_.size(), context_.stream));
    DLSCALE_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
        context_.cudnn, rnn_, CUDNN_WGRAD_MODE_ADD, p.sequence_lengths.as<std::int32_t>(), p.input,
        input, p.state, nullptr, p.output, output, weight_gradients_.size(),
        weight_gradients_.data(), p.workspace.size(), p.workspace.data(), p.reserve.size(),
        p.reserve.data()));
    copy_gradients_out(parameter_gradient);
  }

 private:
  struct Plan {
    RnnDataDescriptor input, output;  // [batch x steps x inputs or hidden]
    TensorDescriptor state;           // [layers x batch x hidden], for the (null) h and c
    DeviceBuffer sequence_lengths;    // int32 per sample, all `steps`, in device memory
    DeviceBuffer workspace, reserve;  // reserve: what forward keeps for backward
    DeviceBuffer discarded_gradient;  // input gradient of a first layer, made when first needed
    // bf16 only: the sequences as cuDNN reads and writes them, kept from forward to backward.
    DeviceBuffer input_bf16, output_bf16, output_gradient_bf16, input_gradient_bf16;
  };

  std::size_t sequence_count(int batch, int width) const {
    return std::size_t(batch) * geometry_.steps * width;
  }

  Plan& plan_for(int batch) {
    if (const auto found = plans_.find(batch); found != plans_.end()) return found->second;
    require_not_capturing(context_.stream, "cuDNN LSTM");
    const auto entry = plans_.try_emplace(batch).first;
    try {
      prepare(entry->second, batch);
    } catch (...) {
      plans_.erase(entry);
      throw;
    }
    return entry->second;
  }

  void prepare(Plan& p, int batch) {
    const auto& g = geometry_;
    // Every sequence is full length: `steps`, as a host array for the descriptors and an int32
    // array in device memory for the v8 calls.
    static_assert(sizeof(int) == sizeof(std::int32_t));
    const std::vector<int> lengths(std::size_t(batch), g.steps);
    DLSCALE_CUDNN_CHECK(
        cudnnSetRNNDataDescriptor(p.input, data_type_, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                  g.steps, batch, g.inputs, lengths.data(), nullptr));
    DLSCALE_CUDNN_CHECK(
        cudnnSetRNNDataDescriptor(p.output, data_type_, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                  g.steps, batch, g.hidden, lengths.data(), nullptr));
    const int dimensions[3] = {g.layers, batch, g.hidden};
    const int strides[3] = {batch * g.hidden, g.hidden, 1};
    DLSCALE_CUDNN_CHECK(cudnnSetTensorNdDescriptor(p.state, data_type_, 3, dimensions, strides));
    if (in_bf16_) {
      const std::size_t inputs = sequence_count(batch, g.inputs) * sizeof(__nv_bfloat16);
      const std::size_t outputs = sequence_count(batch, g.hidden) * sizeof(__nv_bfloat16);
      p.input_bf16 = DeviceBuffer(inputs);
      p.input_gradient_bf16 = DeviceBuffer(inputs);
      p.output_bf16 = DeviceBuffer(outputs);
      p.output_gradient_bf16 = DeviceBuffer(outputs);
    }
    p.sequence_lengths = DeviceBuffer(lengths.size() * sizeof(std::int32_t));
    DLSCALE_CUDA_CHECK(cudaMemcpyAsync(p.sequence_lengths.data(), lengths.data(),
                                       p.sequence_lengths.size(), cudaMemcpyHostToDevice,
                                       context_.stream));
    // Waited for, since `lengths` ends with this function (and this is a first call anyway).
    DLSCALE_CUDA_CHECK(cudaStreamSynchronize(context_.stream));

    std::size_t workspace_bytes = 0, reserve_bytes = 0;
    DLSCALE_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(context_.cudnn, rnn_, CUDNN_FWD_MODE_TRAINING,
                                                  p.input, &workspace_bytes, &reserve_bytes));
    p.workspace = DeviceBuffer(workspace_bytes);
    p.reserve = DeviceBuffer(reserve_bytes);
  }

  // Where cuDNN keeps each layer's gate matrices and biases inside its weight space, as offsets
  // in elements (the weight-gradient space, and under bf16 the float copy, have the same
  // layout). Checked against the layout the transposes assume, so a cuDNN that stored them
  // otherwise fails here instead of training on garbage.
  void locate_gate_parameters() {
    const auto& g = geometry_;
    TensorDescriptor matrix, bias;
    const auto* const base = static_cast<const std::byte*>(weights_.data());
    const auto offset_of = [&](const void* address) {
      return (static_cast<const std::byte*>(address) - base) / std::ptrdiff_t(element_bytes_);
    };
    matrix_offsets_.resize(std::size_t(g.layers));
    bias_offsets_.resize(std::size_t(g.layers));
    for (int stacked = 0; stacked < g.layers; ++stacked) {
      const auto s = std::size_t(stacked);
      for (int layer = 0; layer < 2 * gates; ++layer) {
        const bool input_side = layer < gates;  // 0-3: W_x per gate; 4-7: W_h per gate
        void* matrix_address = nullptr;
        void* bias_address = nullptr;
        DLSCALE_CUDNN_CHECK(cudnnGetRNNWeightParams(context_.cudnn, rnn_, stacked, weights_.size(),
                                                    weights_.data(), layer, matrix, &matrix_address,
                                                    bias, &bias_address));
        const int columns = input_side ? g.layer(stacked).inputs : g.hidden;
        const std::string which =
            "layer " + std::to_string(stacked) + "'s linear layer " + std::to_string(layer);
        expect_matrix(matrix, matrix_address, g.hidden, columns, which);
        matrix_offsets_[s][std::size_t(layer)] = offset_of(matrix_address);
        if (input_side) {
          expect_vector(bias, bias_address, g.hidden, which);
          bias_offsets_[s][std::size_t(layer)] = offset_of(bias_address);
        }
        // With a single input bias, the recurrent linear layers have none: cuDNN gives a null
        // bias address for them. Were there one, it would hold neither a parameter nor zero
        // under bf16, where the whole float gradient space is rounded back into the weight
        // space each step: refused here rather than trained on.
        else if (bias_address != nullptr)
          throw std::runtime_error("cuDNN LSTM: " + which +
                                   " has a bias, where a single input bias leaves none");
      }
    }
  }

  // A [1 x rows x columns] tensor of the RNN's data type with rows of `columns` contiguous
  // elements.
  void expect_matrix(cudnnTensorDescriptor_t descriptor, const void* address, int rows, int columns,
                     const std::string& which) const {
    int dimensions[8] = {}, strides[8] = {};
    const int rank = describe(descriptor, address, dimensions, strides);
    if (rank != 3 || dimensions[0] != 1 || dimensions[1] != rows || dimensions[2] != columns ||
        strides[1] != columns || strides[2] != 1)
      throw std::runtime_error("cuDNN LSTM: " + which + " is not a row-major [hidden x " +
                               std::to_string(columns) + "] matrix of the RNN's data type");
  }

  // `count` elements, one per hidden unit (a vector: only the count matters).
  void expect_vector(cudnnTensorDescriptor_t descriptor, const void* address, int count,
                     const std::string& which) const {
    int dimensions[8] = {}, strides[8] = {};
    const int rank = describe(descriptor, address, dimensions, strides);
    long elements = rank > 0 ? 1 : 0;
    for (int d = 0; d < rank; ++d) elements *= dimensions[d];
    if (elements != count)
      throw std::runtime_error("cuDNN LSTM: " + which +
                               " has no bias of one element per hidden unit");
  }

  // The rank of a tensor descriptor of the RNN's data type (its dimensions and strides filled
  // in), or 0 when there is no tensor at that address or it is of another type.
  int describe(cudnnTensorDescriptor_t descriptor, const void* address, int* dimensions,
               int* strides) const {
    if (address == nullptr) return 0;
    cudnnDataType_t type{};
    int rank = 0;
    DLSCALE_CUDNN_CHECK(
        cudnnGetTensorNdDescriptor(descriptor, 8, &type, &rank, dimensions, strides));
    return type == data_type_ ? rank : 0;
  }

  // target (rows x columns, row-major, row stride target_stride) = the transpose of source
  // (columns x rows, row-major, row stride source_stride). cuBLAS is column-major, so this is
  // C = A^T with C columns x rows and A rows x columns in its terms. B is A again with beta = 0:
  // never read for its value, but a valid operand either way.
  void transpose(int rows, int columns, const float* source, int source_stride, float* target,
                 int target_stride) const {
    const float one = 1.0f, zero = 0.0f;  // host scalars: the handle's default pointer mode
    DLSCALE_CUBLAS_CHECK(cublasSgeam(context_.cublas, CUBLAS_OP_T, CUBLAS_OP_T, columns, rows, &one,
                                     source, source_stride, &zero, source, source_stride, target,
                                     target_stride));
  }

  // dlscale's W_x holds gate `gate` of input i at row i, columns gate*H .. gate*H + H - 1 of an
  // [inputs x 4H] matrix; cuDNN's gate matrix is its transpose, [H x inputs]. Likewise W_h. A
  // stack's layers follow one another, in dlscale's parameters as in cuDNN's pseudo-layers.
  void copy_parameters_in(const float* parameters) {
    const auto& g = geometry_;
    const int four_hidden = gates * g.hidden;
    float* space = in_bf16_ ? float_space_.as<float>() : weights_.as<float>();
    const float* block = parameters;
    for (int stacked = 0; stacked < g.layers; ++stacked) {
      const LstmGeometry one = g.layer(stacked);
      const auto& matrices = matrix_offsets_[std::size_t(stacked)];
      const auto& biases = bias_offsets_[std::size_t(stacked)];
      const float* input_weights = block;
      const float* recurrent_weights = block + one.input_weight_count();
      const float* bias = recurrent_weights + one.recurrent_weight_count();
      for (int gate = 0; gate < gates; ++gate) {
        const std::size_t column = std::size_t(gate) * g.hidden;
        transpose(g.hidden, one.inputs, input_weights + column, four_hidden,
                  space + matrices[std::size_t(gate)], one.inputs);
        transpose(g.hidden, g.hidden, recurrent_weights + column, four_hidden,
                  space + matrices[std::size_t(gates + gate)], g.hidden);
        DLSCALE_CUDA_CHECK(cudaMemcpyAsync(space + biases[std::size_t(gate)], bias + column,
                                           g.hidden * sizeof(float), cudaMemcpyDeviceToDevice,
                                           context_.stream));
      }
      block += one.layer_parameter_count();
    }
    if (in_bf16_)
      round_to_bf16(space, weights_.as<__nv_bfloat16>(), weights_.size() / element_bytes_,
                    context_.stream, context_.batched_loads);
  }

  // The inverse of copy_parameters_in, from cuDNN's weight gradient to dlscale's layout.
  void copy_gradients_out(float* parameter_gradient) const {
    const auto& g = geometry_;
    const int four_hidden = gates * g.hidden;
    const float* space = weight_gradients_.as<float>();
    if (in_bf16_) {
      widen_to_float(weight_gradients_.as<__nv_bfloat16>(), float_space_.as<float>(),
                     weight_gradients_.size() / element_bytes_, context_.stream,
                     context_.batched_loads);
      space = float_space_.as<float>();
    }
    float* block = parameter_gradient;
    for (int stacked = 0; stacked < g.layers; ++stacked) {
      const LstmGeometry one = g.layer(stacked);
      const auto& matrices = matrix_offsets_[std::size_t(stacked)];
      const auto& biases = bias_offsets_[std::size_t(stacked)];
      float* input_weights = block;
      float* recurrent_weights = block + one.input_weight_count();
      float* bias = recurrent_weights + one.recurrent_weight_count();
      for (int gate = 0; gate < gates; ++gate) {
        const std::size_t column = std::size_t(gate) * g.hidden;
        transpose(one.inputs, g.hidden, space + matrices[std::size_t(gate)], one.inputs,
                  input_weights + column, four_hidden);
        transpose(g.hidden, g.hidden, space + matrices[std::size_t(gates + gate)], g.hidden,
                  recurrent_weights + column, four_hidden);
        DLSCALE_CUDA_CHECK(cudaMemcpyAsync(bias + column, space + biases[std::size_t(gate)],
                                           g.hidden * sizeof(float), cudaMemcpyDeviceToDevice,
                                           context_.stream));
      }
      block += one.layer_parameter_count();
    }
  }

  CudaContext context_;
  LstmGeometry geometry_;
  DropoutDescriptor dropout_;
  RnnDescriptor rnn_;
  const bool in_bf16_;
  cudnnDataType_t data_type_ = CUDNN_DATA_FLOAT;  // of the sequences and the weight space
  std::size_t element_bytes_ = sizeof(float);
  DeviceBuffer weights_, weight_gradients_;  // cuDNN's weight space and its gradient
  DeviceBuffer float_space_;  // bf16 only: their float copy, where the transposes run
  std::vector<std::array<std::ptrdiff_t, 2 * gates>> matrix_offsets_;  // per layer of the stack
  std::vector<std::array<std::ptrdiff_t, gates>> bias_offsets_;
  std::map<int, Plan> plans_;  // by batch size; a map, so plans never move
};

}  // namespace

std::unique_ptr<LstmKernel> make_cudnn_lstm(const CudaContext& context,
                                            const LstmGeometry& geometry) {
  return std::make_unique<CudnnLstm>(context, geometry);
}

}  // namespace dlscale::kernels
