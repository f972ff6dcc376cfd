// A dense layer's forward, y = x W^T + b, in one cuBLASLt matmul whose epilogue adds the bias
// (CUBLASLT_EPILOGUE_BIAS), as PyTorch's addmm runs on CUDA, where a GEMM and then add_row_bias
// write y and read and write it again: for lstm-64's 10,000-word head at batch 1024, 655 million
// logits, 5.2 GB of traffic a step in the bias pass alone. The default; off with
// DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=no (cuda_context.hpp).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

namespace dlscale::kernels {

class BiasGemm {
 public:
  BiasGemm();
  ~BiasGemm();
  BiasGemm(const BiasGemm&) = delete;
  BiasGemm& operator=(const BiasGemm&) = delete;

  // Whether cuBLASLt has an algorithm for y [rows x outputs] = x [rows x inputs] W^T + bias with
  // these operands (W [outputs x inputs]; all row-major and dense; x and W of `operand_type`,
  // CUDA_R_32F or CUDA_R_16BF; y and bias float; `compute` CUBLAS_COMPUTE_32F or _32F_FAST_TF32)
  // at these addresses' alignments. Chosen once per shape, types and alignments and kept, so that
  // a captured step finds it made; a bias off a 16-byte boundary is never offered.
  bool supports(int rows, int inputs, int outputs, cudaDataType_t operand_type,
                cublasComputeType_t compute, const void* x, const void* weights, const float* bias,
                const float* y);
  // Queues it on `stream`; supports() must have said yes for the same arguments.
  void run(int rows, int inputs, int outputs, cudaDataType_t operand_type,
           cublasComputeType_t compute, const void* x, const void* weights, const float* bias,
           float* y, cudaStream_t stream);
  // The matmuls run() has queued: what a test reads to know the epilogue ran at all.
  std::size_t runs() const { return runs_; }

 private:
  struct Plan;
  // rows, inputs, outputs, operand type, compute type, and the alignments of x, W, the bias and
  // y (bytes, up to 256)
  using Key = std::tuple<int, int, int, int, int, int, int, int, int>;
  static Key key_of(int rows, int inputs, int outputs, cudaDataType_t operand_type,
                    cublasComputeType_t compute, const void* x, const void* weights,
                    const float* bias, const float* y);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // null where cuBLASLt offered no algorithm
  std::size_t runs_ = 0;
};

}  // namespace dlscale::kernels
