// The checked-call idioms of the CUDA device: one macro per library (CUDA runtime, cuBLAS, cuDNN),
// each throwing LibraryError with the call, file, line and the library's own error string.
#pragma once

#include <string_view>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace dlscale::kernels {

void check_cuda(cudaError_t result, std::string_view call, std::string_view file, int line);
void check_cublas(cublasStatus_t result, std::string_view call, std::string_view file, int line);
void check_cudnn(cudnnStatus_t result, std::string_view call, std::string_view file, int line);

}  // namespace dlscale::kernels

#define DLSCALE_CUDA_CHECK(call) ::dlscale::kernels::check_cuda((call), #call, __FILE__, __LINE__)
#define DLSCALE_CUBLAS_CHECK(call) \
  ::dlscale::kernels::check_cublas((call), #call, __FILE__, __LINE__)
#define DLSCALE_CUDNN_CHECK(call) ::dlscale::kernels::check_cudnn((call), #call, __FILE__, __LINE__)
