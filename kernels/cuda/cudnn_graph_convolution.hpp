// The CUDA device's convolutions on cuDNN's graph API (DLSCALE_CUDNN_API=graph), through NVIDIA's
// header-only cuDNN frontend: forward (with the bias fused where cuDNN offers it), backward data
// and backward filter as three graphs on packed NHWC tensors, their engines from cuDNN's
// heuristics and timed once per layer and batch size, the fastest kept. Built only where CMake
// found the frontend (DLSCALE_HAVE_CUDNN_FRONTEND).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_context.hpp"
#include "kernels/image_kernels.hpp"

namespace dlscale::kernels {

// What the graph convolutions of one device share (the engines chosen per shape, one workspace);
// the device owns it and hands it to its kernels through CudaContext::convolution_graphs.
std::shared_ptr<ConvolutionGraphCache> make_convolution_graph_cache();

// What the engine searches on this device built, for each pass's shape and each variant of its
// graph they timed: the engines built and how many of them compiled with NVRTC (the search's
// cost, and what DLSCALE_CUDNN_BUILD_THREADS must leave as one thread builds it).
std::map<std::string, std::pair<int, int>> engines_built_per_search(
    const ConvolutionGraphCache& cache);

// Which of those variants (the keys of engines_built_per_search) found an engine that ran.
std::set<std::string> variants_with_an_engine(const ConvolutionGraphCache& cache);

// With DLSCALE_CUDNN_KERNEL_CACHE=yes: per graph topology (everything but the tensors' sizes), how
// many graphs of it the searches on this device ran as dynamic-shape graphs sharing its kernel
// cache. Empty without the setting, or where no dynamic-shape graph had an engine.
std::map<std::string, int> kernel_cache_use(const ConvolutionGraphCache& cache);

std::unique_ptr<ConvolutionKernel> make_cudnn_graph_convolution(
    const CudaContext& context, const ConvolutionGeometry& geometry);

}  // namespace dlscale::kernels
