// The cuDNN frontend's handle on cuDNN, under NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: one per
// module, shared by every kernel built on the frontend (graph convolutions, fused attention).
#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/cudnn_frontend_check.hpp"

namespace dlscale::kernels {

void open_cudnn_for_the_frontend() {
  if (cudnn_frontend::cudnn_dlhandle != nullptr) return;
  // cuDNN is mapped already, as the module links it: dlopen hands back its handle.
  cudnn_frontend::cudnn_dlhandle = dlopen("libcudnn.so.9", RTLD_NOW);
  if (cudnn_frontend::cudnn_dlhandle == nullptr) {
    const char* error = dlerror();
    throw std::runtime_error(std::string("cuDNN frontend: cannot open libcudnn.so.9: ") +
                             (error != nullptr ? error : "unknown error"));
  }
}

}  // namespace dlscale::kernels

// The frontend's one handle on cuDNN (declared extern by its headers under dynamic loading).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
