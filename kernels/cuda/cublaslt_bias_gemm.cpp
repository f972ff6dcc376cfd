// cuBLASLt's matmul with the bias epilogue, for a dense layer's forward (cublaslt_bias_gemm.hpp).
// Row-major y = x W^T is, read column-major, y^T [outputs x rows] = W [outputs x inputs] x^T: W
// stored row-major is column-major [inputs x outputs] taken transposed, x^T is x as stored, and
// the bias, one value per row of that column-major result, is what the epilogue broadcasts.
#include "kernels/cuda/cublaslt_bias_gemm.hpp"

#include <cstdint>
#include <memory>
#include <utility>

#include "kernels/cuda/cuda_check.hpp"

namespace dlscale::kernels {

namespace {

// What PyTorch gives cuBLASLt too (CUBLASLT_WORKSPACE_SIZE's default on Hopper).
constexpr std::size_t workspace_bytes = std::size_t(32) << 20;

// The largest power of two up to 256 that divides the address: cuBLASLt's heuristics assume 256
// unless told, and an algorithm chosen for aligned operands may fail on others.
int alignment_of(const void* address) {
  const auto value = reinterpret_cast<std::uintptr_t>(address);
  int alignment = 1;
  while (alignment < 256 && value % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

}  // namespace

struct BiasGemm::Plan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t weights = nullptr, inputs = nullptr, outputs = nullptr;
  cublasLtMatmulAlgo_t algorithm{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (outputs != nullptr) cublasLtMatrixLayoutDestroy(outputs);
    if (inputs != nullptr) cublasLtMatrixLayoutDestroy(inputs);
    if (weights != nullptr) cublasLtMatrixLayoutDestroy(weights);
    if (operation != nullptr) cublasLtMatmulDescDestroy(operation);
  }
};

BiasGemm::BiasGemm() {
  DLSCALE_CUBLAS_CHECK(cublasLtCreate(&handle_));
  try {
    DLSCALE_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes));
  } catch (...) {  // no destructor runs for a constructor that throws
    cublasLtDestroy(handle_);
    throw;
  }
}

BiasGemm::~BiasGemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

BiasGemm::Key BiasGemm::key_of(int rows, int inputs, int outputs, cudaDataType_t operand_type,
                               cublasComputeType_t compute, const void* x, const void* weights,
                               const float* bias, const float* y) {
  return {rows,
          inputs,
          outputs,
          int(operand_type),
          int(compute),
          alignment_of(x),
          alignment_of(weights),
          alignment_of(bias),
          alignment_of(y)};
}

bool BiasGemm::supports(int rows, int inputs, int outputs, cudaDataType_t operand_type,
                        cublasComputeType_t compute, const void* x, const void* weights,
                        const float* bias, const float* y) {
  // A bias off a 16-byte boundary fails in some of cuBLASLt's kernels (Marian requires 16 too);
  // and PyTorch keeps a dimension of 1 off this path (an fp32 bias epilogue that dropped the bias
  // of a one-row output was reported on older GPUs).
  if (bias == nullptr || alignment_of(bias) < 16 || rows < 2 || inputs < 2 || outputs < 2)
    return false;
  const Key key = key_of(rows, inputs, outputs, operand_type, compute, x, weights, bias, y);
  if (const auto found = plans_.find(key); found != plans_.end()) return found->second != nullptr;

  auto plan = std::make_unique<Plan>();
  DLSCALE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->operation, compute, CUDA_R_32F));
  const cublasOperation_t transposed = CUBLAS_OP_T, as_stored = CUBLAS_OP_N;
  DLSCALE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                                      &transposed, sizeof transposed));
  DLSCALE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_TRANSB,
                                                      &as_stored, sizeof as_stored));
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  DLSCALE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      plan->operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  const cudaDataType_t bias_type = CUDA_R_32F;  // the float parameters, also under bf16
  DLSCALE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      plan->operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  // The heuristic reads the bias pointer's alignment from the descriptor (cublasLt.h): the real
  // one, as PyTorch's gemm_and_bias sets it, not the null that would pass for 256-byte aligned.
  DLSCALE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      plan->operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  DLSCALE_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan->weights, operand_type, inputs, outputs, inputs));
  DLSCALE_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan->inputs, operand_type, inputs, rows, inputs));
  DLSCALE_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan->outputs, CUDA_R_32F, outputs, rows, outputs));

  cublasLtMatmulPreference_t preference = nullptr;
  DLSCALE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::size_t most_workspace = workspace_bytes;
  const auto w_alignment = std::uint32_t(alignment_of(weights));
  const auto x_alignment = std::uint32_t(alignment_of(x));
  const auto y_alignment = std::uint32_t(alignment_of(y));
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &most_workspace, sizeof most_workspace);
  for (const auto& [attribute, alignment] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, w_alignment},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, x_alignment},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, y_alignment},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, y_alignment}})
    if (status == CUBLAS_STATUS_SUCCESS)
      status =
          cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof alignment);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->operation, plan->weights, plan->inputs,
                                            plan->outputs, plan->outputs, preference, 1, &result,
                                            &found);
  cublasLtMatmulPreferenceDestroy(preference);
  // No algorithm (NOT_SUPPORTED, none returned, or one whose own state is not a success, when
  // the result's other fields are not to be read): the caller takes its GEMM and bias kernel.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      (status == CUBLAS_STATUS_SUCCESS && (found == 0 || result.state != CUBLAS_STATUS_SUCCESS))) {
    plans_.emplace(key, nullptr);
    return false;
  }
  DLSCALE_CUBLAS_CHECK(status);
  plan->algorithm = result.algo;
  plans_.emplace(key, std::move(plan));
  return true;
}

void BiasGemm::run(int rows, int inputs, int outputs, cudaDataType_t operand_type,
                   cublasComputeType_t compute, const void* x, const void* weights,
                   const float* bias, float* y, cudaStream_t stream) {
  const Plan& plan =
      *plans_.at(key_of(rows, inputs, outputs, operand_type, compute, x, weights, bias, y));
  // The bias pointer may differ from layer to layer of one shape: set on every call (a host-side
  // descriptor attribute, so a captured step keeps the value it had when captured).
  DLSCALE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float one = 1, zero = 0;
  DLSCALE_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.operation, &one, weights, plan.weights, x,
                                      plan.inputs, &zero, y, plan.outputs, y, plan.outputs,
                                      &plan.algorithm, workspace_, workspace_bytes, stream));
  ++runs_;
}

}  // namespace dlscale::kernels
