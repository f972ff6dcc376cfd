// Formats CUDA, cuBLAS and cuDNN failures as LibraryError; a failed allocation as OutOfMemory.
#include "kernels/cuda/cuda_check.hpp"

#include "core/errors.hpp"

namespace dlscale::kernels {

void check_cuda(cudaError_t result, std::string_view call, std::string_view file, int line) {
  if (result == cudaErrorMemoryAllocation)
    throw OutOfMemory("CUDA", call, file, line, cudaGetErrorString(result));
  if (result != cudaSuccess)
    throw LibraryError("CUDA", call, file, line, cudaGetErrorString(result));
}

void check_cublas(cublasStatus_t result, std::string_view call, std::string_view file, int line) {
  if (result == CUBLAS_STATUS_ALLOC_FAILED)
    throw OutOfMemory("cuBLAS", call, file, line, cublasGetStatusString(result));
  if (result != CUBLAS_STATUS_SUCCESS)
    throw LibraryError("cuBLAS", call, file, line, cublasGetStatusString(result));
}

void check_cudnn(cudnnStatus_t result, std::string_view call, std::string_view file, int line) {
  if (result == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      result == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    throw OutOfMemory("cuDNN", call, file, line, cudnnGetErrorString(result));
  if (result != CUDNN_STATUS_SUCCESS)
    throw LibraryError("cuDNN", call, file, line, cudnnGetErrorString(result));
}

}  // namespace dlscale::kernels
