// Formats CUDA, cuBLAS and cuDNN failures as LibraryError.
#include "kernels/cuda/cuda_check.hpp"

#include "core/errors.hpp"

namespace dlscale::kernels {

void check_cuda(cudaError_t result, std::string_view call, std::string_view file, int line) {
  if (result != cudaSuccess)
    throw LibraryError("CUDA", call, file, line, cudaGetErrorString(result));
}

void check_cublas(cublasStatus_t result, std::string_view call, std::string_view file, int line) {
  if (result != CUBLAS_STATUS_SUCCESS)
    throw LibraryError("cuBLAS", call, file, line, cublasGetStatusString(result));
}

void check_cudnn(cudnnStatus_t result, std::string_view call, std::string_view file, int line) {
  if (result != CUDNN_STATUS_SUCCESS)
    throw LibraryError("cuDNN", call, file, line, cudnnGetErrorString(result));
}

}  // namespace dlscale::kernels
