// Per-channel sums, bias and batch norm on image tensors (channel_kernels.hpp).
//
// A sum over the rows of an NHWC [rows x channels] matrix runs in two kernels: blocks of 32
// channels x 8 rows each sum a slab of rows (a warp reads 32 consecutive floats of a row, so reads
// are coalesced), writing one partial per slab and channel; then one block per channel adds its
// slabs' partials in double, in a fixed tree. Slabs are sized so that about slab_blocks blocks run
// whatever the shape: vgg-16's first layers have 3.2 million rows of 64 channels, resnet-50's
// last 3,136 rows of 2,048. An NCHW tensor (the legacy path's batch norm and convolution bias
// gradient) holds each image's channel as one run of pixels, so there a block sums one channel
// over a slab of consecutive images (its threads striding over the slab's pixels, image after
// image), and the same second kernel adds the partials. Element-wise passes find a value's channel
// with channel_index.cuh in either layout. (MathOps::column_sums in cuda_math.cu, for a float
// dense layer's bias gradient over a batch of rows, needs no slabs and no scratch: its rows are a
// batch size. Under bf16 a dense layer's backward sums its bias here, in the pass that rounds dy.)
#include "kernels/cuda/channel_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/channel_index.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cudnn_support.hpp"
#include "kernels/cuda/element_values.cuh"

namespace dlscale::kernels {

namespace {

constexpr int lanes = 32;            // channels a block sums: one warp's width
constexpr int row_threads = 8;       // rows a block reads at once
constexpr int slab_blocks = 1024;    // blocks a reduction aims for (H200: 132 multiprocessors)
constexpr int min_slab_rows = 64;    // fewer rows per slab would only add partials
constexpr int finish_threads = 256;  // per channel, adding the partials
constexpr int elementwise_threads = 256;
constexpr int elementwise_blocks = 132 * 32;  // grid-stride loops: enough to fill any one GPU

struct Slabs {
  int count = 1;
  std::int64_t rows_each = 0;
};

Slabs slabs_for(std::int64_t rows, int channels) {
  const std::int64_t tiles = (channels + lanes - 1) / lanes;
  const std::int64_t wanted = std::max<std::int64_t>(1, slab_blocks / tiles);
  const std::int64_t most = std::max<std::int64_t>(1, (rows + min_slab_rows - 1) / min_slab_rows);
  const std::int64_t count = std::min(wanted, most);
  const std::int64_t rows_each = std::max<std::int64_t>(1, (rows + count - 1) / count);
  return {int((rows + rows_each - 1) / rows_each), rows_each};
}

// partials[slab][c] = the sum over the slab's rows r of term(r * channels + c, c), two sums at
// once (x and y of a float2). Rows are read 8 at a time by the block's 8 row threads, each adding
// its rows in order; the 8 row sums are then added in order.
template <typename Term>
__global__ void slab_sums_kernel(Term term, std::int64_t rows, int channels, std::int64_t rows_each,
                                 float2* partials) {
  __shared__ float2 row_sums[row_threads][lanes];
  const int c = blockIdx.x * lanes + threadIdx.x;
  const std::int64_t first = std::int64_t(blockIdx.y) * rows_each;
  const std::int64_t end = first + rows_each < rows ? first + rows_each : rows;
  float2 sum = make_float2(0.0f, 0.0f);
  if (c < channels) {
#pragma unroll 4
    for (std::int64_t r = first + threadIdx.y; r < end; r += row_threads) {
      const float2 value = term(r * channels + c, c);
      sum.x += value.x;
      sum.y += value.y;
    }
  }
  row_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    for (int k = 1; k < row_threads; ++k) {
      sum.x += row_sums[k][threadIdx.x].x;
      sum.y += row_sums[k][threadIdx.x].y;
    }
    partials[std::size_t(blockIdx.y) * channels + c] = sum;
  }
}

// One block per channel: the slabs' partials added in double (each thread its slabs in order,
// then a fixed tree), and finish(c, sum_x, sum_y) called once.
template <typename Finish>
__global__ void finish_sums_kernel(const float2* partials, int slabs, int channels, Finish finish) {
  __shared__ double sum_x[finish_threads], sum_y[finish_threads];
  const int c = blockIdx.x;
  double x = 0, y = 0;
  for (int s = threadIdx.x; s < slabs; s += finish_threads) {
    const float2 partial = partials[std::size_t(s) * channels + c];
    x += partial.x;
    y += partial.y;
  }
  sum_x[threadIdx.x] = x;
  sum_y[threadIdx.x] = y;
  __syncthreads();
  for (int half = finish_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sum_x[threadIdx.x] += sum_x[threadIdx.x + half];
      sum_y[threadIdx.x] += sum_y[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) finish(c, sum_x[0], sum_y[0]);
}

template <typename Term, typename Finish>
void sum_rows(Term term, Finish finish, std::int64_t rows, int channels, void* scratch,
              cudaStream_t stream) {
  const Slabs slabs = slabs_for(rows, channels);
  auto* partials = static_cast<float2*>(scratch);
  const dim3 grid(unsigned((channels + lanes - 1) / lanes), unsigned(slabs.count));
  slab_sums_kernel<<<grid, dim3(lanes, row_threads), 0, stream>>>(term, rows, channels,
                                                                  slabs.rows_each, partials);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
  finish_sums_kernel<<<unsigned(channels), finish_threads, 0, stream>>>(partials, slabs.count,
                                                                        channels, finish);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

// The NCHW sums: partials[slab][c] = the sum over the slab's images n and pixels p of
// term((n * channels + c) * pixels + p, c), two sums at once. The block's threads take the slab's
// values (image after image, pixel after pixel) in turn, 256 apart, so neighbouring threads read
// neighbouring pixels and every warp has work however few images a slab holds or however few
// pixels an image has; each thread adds its values in order, each warp adds its lanes in a fixed
// shuffle tree, then thread 0 adds the warps in order.
constexpr int image_threads = 256;
constexpr int image_warps = image_threads / lanes;

struct ImageSlabs {
  int count = 1;        // blocks per channel
  int images_each = 1;  // consecutive images per block; the last slab may have fewer
};

// At least one image per slab; one slab per channel where the channels alone fill the GPU.
ImageSlabs image_slabs_for(int batch, int channels) {
  batch = std::max(batch, 1);
  const int wanted = std::max(1, slab_blocks / std::max(channels, 1));
  const int count = std::min(wanted, batch);
  const int images_each = (batch + count - 1) / count;
  return {(batch + images_each - 1) / images_each, images_each};
}

// The partials' scratch (bytes) of sum_images for these dimensions.
std::size_t image_sums_scratch_bytes(int batch, int channels) {
  return std::size_t(image_slabs_for(batch, channels).count) * std::size_t(channels) *
         sizeof(float2);
}

template <typename Term>
__global__ void __launch_bounds__(image_threads)
    image_slab_sums_kernel(Term term, int batch, int channels, std::int64_t pixels, int images_each,
                           float2* partials) {
  __shared__ float2 warp_sums[image_warps];
  const int c = blockIdx.x;
  const int first = blockIdx.y * images_each;
  const int end = min(first + images_each, batch);
  const int warp = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  // This thread's value q of the slab's (end - first) * pixels is pixel p of image n; the next,
  // image_threads later, is step_images images and step_pixels pixels on.
  const std::int64_t values = std::int64_t(end - first) * pixels;
  const std::int64_t step_images = image_threads / pixels, step_pixels = image_threads % pixels;
  std::int64_t n = first + threadIdx.x / pixels, p = threadIdx.x % pixels;
  float2 sum = make_float2(0.0f, 0.0f);
  for (std::int64_t q = threadIdx.x; q < values; q += image_threads) {
    const float2 value = term((n * channels + c) * pixels + p, c);
    sum.x += value.x;
    sum.y += value.y;
    n += step_images;
    p += step_pixels;
    if (p >= pixels) {
      p -= pixels;
      ++n;
    }
  }
  for (int offset = lanes / 2; offset > 0; offset /= 2) {
    sum.x += __shfl_down_sync(0xffffffffu, sum.x, offset);
    sum.y += __shfl_down_sync(0xffffffffu, sum.y, offset);
  }
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float2 total = warp_sums[0];
    for (int w = 1; w < image_warps; ++w) {
      total.x += warp_sums[w].x;
      total.y += warp_sums[w].y;
    }
    partials[std::size_t(blockIdx.y) * channels + c] = total;
  }
}

template <typename Term, typename Finish>
void sum_images(Term term, Finish finish, int batch, int channels, std::int64_t pixels,
                void* scratch, cudaStream_t stream) {
  const ImageSlabs slabs = image_slabs_for(batch, channels);
  auto* partials = static_cast<float2*>(scratch);
  const dim3 grid(unsigned(channels), unsigned(slabs.count));
  image_slab_sums_kernel<<<grid, image_threads, 0, stream>>>(term, batch, channels, pixels,
                                                             slabs.images_each, partials);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
  finish_sums_kernel<<<unsigned(channels), finish_threads, 0, stream>>>(partials, slabs.count,
                                                                        channels, finish);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

unsigned elementwise_grid(std::int64_t count) {
  return unsigned(std::min<std::int64_t>((count + elementwise_threads - 1) / elementwise_threads,
                                         elementwise_blocks));
}

// --- Terms and finishes ---------------------------------------------------------------------

// T, here and below: the tensors' element type, float or bf16 (bf16 images); sums in float.
template <typename T>
struct Values {  // x
  const T* x;
  __device__ float2 operator()(std::int64_t i, int) const {
    return make_float2(load_float(x[i]), 0.0f);
  }
};

template <typename T>
struct CentredSquares {  // (x - mean)^2
  const T* x;
  const float* mean;
  __device__ float2 operator()(std::int64_t i, int c) const {
    const float centred = load_float(x[i]) - mean[c];
    return make_float2(centred * centred, 0.0f);
  }
};

// The output gradient through a fused ReLU: it passes where y > 0 (y is null without one).
template <typename T>
__device__ float through_relu(const T* dy, const T* y, std::int64_t i) {
  return y != nullptr && !(load_float(y[i]) > 0.0f) ? 0.0f : load_float(dy[i]);
}

// That gradient, and it times the centred input.
template <typename T>
struct GradientTerms {
  const T* dy;
  const T* y;
  const T* x;
  const float* mean;
  __device__ float2 operator()(std::int64_t i, int c) const {
    const float gradient = through_relu(dy, y, i);
    return make_float2(gradient, gradient * (load_float(x[i]) - mean[c]));
  }
};

// The output gradient through a fused ReLU (y null without one), also stored in `to`'s type.
template <typename From, typename To>
struct PreparedGradient {
  const From* dy;
  const From* y;
  To* to;
  __device__ float2 operator()(std::int64_t i, int) const {
    const float gradient = through_relu(dy, y, i);
    to[i] = store_float<To>(gradient);
    return make_float2(gradient, 0.0f);
  }
};

struct StoreSums {
  float* sums;
  __device__ void operator()(int c, double x, double) const { sums[c] = float(x); }
};

struct StoreMean {
  float* mean;
  double count;
  __device__ void operator()(int c, double x, double) const { mean[c] = float(x / count); }
};

// From the summed squares: 1 / sqrt(var + epsilon), and scale times it.
struct StoreDeviation {
  const float* scale;
  float* inverse_deviation;
  float* scaled_inverse;
  double count;
  double epsilon;
  __device__ void operator()(int c, double squares, double) const {
    const double inverse = 1.0 / sqrt(squares / count + epsilon);
    inverse_deviation[c] = float(inverse);
    scaled_inverse[c] = float(scale[c] * inverse);
  }
};

// dshift = sum of g, dscale = sum of g * x_hat; and what the input gradient subtracts per
// channel: their means over the rows.
struct StoreParameterGradients {
  const float* inverse_deviation;
  float* scale_gradient;
  float* shift_gradient;
  float* mean_gradient;        // sum g / count
  float* mean_gradient_x_hat;  // sum g * x_hat / count
  double count;
  __device__ void operator()(int c, double gradient, double gradient_centred) const {
    const double gradient_x_hat = gradient_centred * inverse_deviation[c];
    shift_gradient[c] = float(gradient);
    scale_gradient[c] = float(gradient_x_hat);
    mean_gradient[c] = float(gradient / count);
    mean_gradient_x_hat[c] = float(gradient_x_hat / count);
  }
};

// --- Element-wise kernels ---------------------------------------------------------------------

// y += bias (where given; its channel by `channels`, channel_index.cuh), then max(y, 0) with the
// ReLU (NaN becomes 0, as batch norm's).
template <typename T, typename Channels>
__global__ void add_channel_bias_kernel(T* y, const float* bias, bool relu, std::int64_t count,
                                        Channels channels) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const float value =
        bias != nullptr ? load_float(y[i]) + bias[channels.of(i)] : load_float(y[i]);
    y[i] = store_float<T>(relu && !(value > 0.0f) ? 0.0f : value);
  }
}

// Every element's term of a sum that is not wanted: what the term writes is all.
template <typename Term>
__global__ void elementwise_term_kernel(Term term, std::int64_t count) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    (void)term(i, 0);
}

// y = (x - mean) * scale / sqrt(var + epsilon) + shift, then max(y, 0) with the ReLU.
template <typename T, typename Channels>
__global__ void normalize_kernel(const T* x, const float* mean, const float* scaled_inverse,
                                 const float* shift, bool relu, std::int64_t count,
                                 Channels channels, T* y) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const int c = channels.of(i);
    const float value = (load_float(x[i]) - mean[c]) * scaled_inverse[c] + shift[c];
    y[i] = store_float<T>(relu && !(value > 0.0f) ? 0.0f : value);
  }
}

// dx = scale / sqrt(var + epsilon) * (g - mean(g) - x_hat * mean(g * x_hat)), with g the output
// gradient through the ReLU: the batch-statistics gradient of Ioffe & Szegedy (2015).
template <typename T, typename Channels>
__global__ void input_gradient_kernel(const T* dy, const T* y, const T* x, const float* mean,
                                      const float* inverse_deviation, const float* scaled_inverse,
                                      const float* mean_gradient, const float* mean_gradient_x_hat,
                                      std::int64_t count, Channels channels, T* dx) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const int c = channels.of(i);
    const float gradient = through_relu(dy, y, i);
    const float x_hat = (load_float(x[i]) - mean[c]) * inverse_deviation[c];
    dx[i] = store_float<T>(scaled_inverse[c] *
                           (gradient - mean_gradient[c] - x_hat * mean_gradient_x_hat[c]));
  }
}

// --- Batch norm -------------------------------------------------------------------------------

class DlscaleBatchNorm final : public BatchNormKernel {
 public:
  DlscaleBatchNorm(const CudaContext& context, const BatchNormGeometry& geometry)
      : context_(context),
        geometry_(geometry),
        channels_(geometry.shape.channels),
        nhwc_(geometry.layout == ImageLayout::native && context.native_is_nhwc()),
        in_bf16_(geometry.layout == ImageLayout::native && context.native_is_bf16()),
        // mean, 1/deviation, scale/deviation, mean(g), mean(g x_hat): one float each per channel
        per_channel_(5 * std::size_t(channels_) * sizeof(float)) {
    if (channels_ < 1) throw std::invalid_argument("dlscale's batch norm: no channels");
  }

  void forward(int batch, const float* x, const float* scale, const float* shift,
               float* y) override {
    if (in_bf16_)
      forward_as(batch, as_bf16(x), scale, shift, as_bf16(y));
    else
      forward_as(batch, x, scale, shift, y);
    last_output_ = y;
  }

  void backward(int batch, const float* x, const float* /*scale*/, const float* /*shift*/,
                const float* output_gradient, float* input_gradient, float* scale_gradient,
                float* shift_gradient) override {
    if (last_output_ == nullptr)
      throw std::logic_error("dlscale's batch norm: backward before forward");
    const float* relu_output = geometry_.relu ? last_output_ : nullptr;
    if (in_bf16_)
      backward_as(batch, as_bf16(x), as_bf16(relu_output), as_bf16(output_gradient),
                  as_bf16(input_gradient), scale_gradient, shift_gradient);
    else
      backward_as(batch, x, relu_output, output_gradient, input_gradient, scale_gradient,
                  shift_gradient);
  }

 private:
  // T: the images' element type, float or bf16 (statistics, parameters and their gradients are
  // float either way).
  template <typename T>
  void forward_as(int batch, const T* x, const float* scale, const float* shift, T* y) {
    const std::int64_t rows = rows_of(batch), count = rows * channels_;
    sum_per_channel(Values<T>{x}, StoreMean{mean(), double(rows)}, batch);
    sum_per_channel(
        CentredSquares<T>{x, mean()},
        StoreDeviation{scale, inverse_deviation(), scaled_inverse(), double(rows), double(epsilon)},
        batch);
    with_channels(count, [&](auto channels) {
      normalize_kernel<<<elementwise_grid(count), elementwise_threads, 0, context_.stream>>>(
          x, mean(), scaled_inverse(), shift, geometry_.relu, count, channels, y);
    });
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  template <typename T>
  void backward_as(int batch, const T* x, const T* relu_output, const T* output_gradient,
                   T* input_gradient, float* scale_gradient, float* shift_gradient) {
    const std::int64_t rows = rows_of(batch), count = rows * channels_;
    sum_per_channel(GradientTerms<T>{output_gradient, relu_output, x, mean()},
                    StoreParameterGradients{inverse_deviation(), scale_gradient, shift_gradient,
                                            mean_gradient(), mean_gradient_x_hat(), double(rows)},
                    batch);
    if (input_gradient == nullptr) return;
    with_channels(count, [&](auto channels) {
      input_gradient_kernel<<<elementwise_grid(count), elementwise_threads, 0, context_.stream>>>(
          output_gradient, relu_output, x, mean(), inverse_deviation(), scaled_inverse(),
          mean_gradient(), mean_gradient_x_hat(), count, channels, input_gradient);
    });
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

  // A per-channel sum of term over the batch, finished by finish: over the rows of an NHWC
  // tensor, or over the images' runs of pixels of an NCHW one.
  template <typename Term, typename Finish>
  void sum_per_channel(Term term, Finish finish, int batch) {
    void* scratch = plan_for(batch).data();
    if (nhwc_)
      sum_rows(term, finish, rows_of(batch), channels_, scratch, context_.stream);
    else
      sum_images(term, finish, batch, channels_, pixels(), scratch, context_.stream);
  }

  // Calls run(channels) with FastChannels (channel_index.cuh) where the setting asks for it and the
  // tensor has fewer than 2^31 elements, else WideChannels: in NHWC each channel's run is 1
  // element, in NCHW an image's pixels.
  template <typename Run>
  void with_channels(std::int64_t count, Run&& run) const {
    const std::int64_t channel_run = nhwc_ ? 1 : pixels();
    if (context_.fast_divmod && count < (std::int64_t(1) << 31))
      run(FastChannels{FastDivmod(int(channel_run)), FastDivmod(channels_)});
    else
      run(WideChannels{channel_run, channels_});
  }

  std::int64_t pixels() const {
    return std::int64_t(geometry_.shape.height) * geometry_.shape.width;
  }
  // The values each channel's statistics are taken over: batch x height x width, in either layout.
  std::int64_t rows_of(int batch) const { return std::int64_t(batch) * pixels(); }
  // The partial sums' scratch for a batch size: made on its first call, before any capture.
  DeviceBuffer& plan_for(int batch) {
    return plan_of(scratch_, batch, context_.stream, "dlscale's batch norm", [&](DeviceBuffer& b) {
      b = DeviceBuffer(nhwc_ ? channel_sums_scratch_bytes(rows_of(batch), channels_)
                             : image_sums_scratch_bytes(batch, channels_));
    });
  }
  float* per_channel(int k) const { return per_channel_.as<float>() + std::size_t(k) * channels_; }
  float* mean() const { return per_channel(0); }
  float* inverse_deviation() const { return per_channel(1); }
  float* scaled_inverse() const { return per_channel(2); }
  float* mean_gradient() const { return per_channel(3); }
  float* mean_gradient_x_hat() const { return per_channel(4); }

  CudaContext context_;
  BatchNormGeometry geometry_;
  int channels_;
  bool nhwc_;     // the images are NHWC (the graph path), else NCHW (the legacy path)
  bool in_bf16_;  // x, y and their gradients are bf16 images
  DeviceBuffer per_channel_;
  std::map<int, DeviceBuffer> scratch_;  // by batch size
  const float* last_output_ = nullptr;   // the ReLU's output, for its gradient mask
};

}  // namespace

std::size_t channel_sums_scratch_bytes(std::int64_t rows, int channels) {
  return std::size_t(slabs_for(rows, channels).count) * std::size_t(channels) * sizeof(float2);
}

template <typename T>
void sum_channels(const T* x, std::int64_t rows, int channels, float* sums, void* scratch,
                  cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return;
  sum_rows(Values<T>{x}, StoreSums{sums}, rows, channels, scratch, stream);
}

template void sum_channels<float>(const float*, std::int64_t, int, float*, void*, cudaStream_t);
template void sum_channels<__nv_bfloat16>(const __nv_bfloat16*, std::int64_t, int, float*, void*,
                                          cudaStream_t);

template <typename From, typename To>
void prepare_output_gradient(const From* dy, const From* relu_output, To* to, std::int64_t rows,
                             int channels, float* sums, void* scratch, cudaStream_t stream) {
  const std::int64_t count = rows * channels;
  if (count <= 0) return;
  const PreparedGradient<From, To> term{dy, relu_output, to};
  if (sums != nullptr) {
    sum_rows(term, StoreSums{sums}, rows, channels, scratch, stream);
    return;
  }
  elementwise_term_kernel<<<elementwise_grid(count), elementwise_threads, 0, stream>>>(term, count);
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

template void prepare_output_gradient<float, float>(const float*, const float*, float*,
                                                    std::int64_t, int, float*, void*, cudaStream_t);
template void prepare_output_gradient<float, __nv_bfloat16>(const float*, const float*,
                                                            __nv_bfloat16*, std::int64_t, int,
                                                            float*, void*, cudaStream_t);
template void prepare_output_gradient<__nv_bfloat16, __nv_bfloat16>(const __nv_bfloat16*,
                                                                    const __nv_bfloat16*,
                                                                    __nv_bfloat16*, std::int64_t,
                                                                    int, float*, void*,
                                                                    cudaStream_t);

template <typename T>
void add_channel_bias(T* y, const float* bias, bool relu, std::int64_t rows, int channels,
                      cudaStream_t stream) {
  const std::int64_t count = rows * channels;
  if (count <= 0 || (bias == nullptr && !relu)) return;
  add_channel_bias_kernel<<<elementwise_grid(count), elementwise_threads, 0, stream>>>(
      y, bias, relu, count, WideChannels{1, channels});
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

template void add_channel_bias<float>(float*, const float*, bool, std::int64_t, int, cudaStream_t);
template void add_channel_bias<__nv_bfloat16>(__nv_bfloat16*, const float*, bool, std::int64_t, int,
                                              cudaStream_t);

// --- The legacy convolution's bias and ReLU on NCHW images -------------------------------------

void add_bias_and_relu(int batch, int channels, std::int64_t pixels, const float* bias, bool relu,
                       bool fast_divmod, float* y, cudaStream_t stream) {
  if (bias == nullptr && !relu)
    throw std::invalid_argument("NCHW bias and ReLU: neither a bias to add nor a ReLU");
  if (batch <= 0 || channels <= 0 || pixels <= 0) return;
  const std::int64_t count = std::int64_t(batch) * channels * pixels;
  const auto launch = [&](auto channel_of) {
    add_channel_bias_kernel<<<elementwise_grid(count), elementwise_threads, 0, stream>>>(
        y, bias, relu, count, channel_of);
  };
  if (fast_divmod && count < (std::int64_t(1) << 31))
    launch(FastChannels{FastDivmod(int(pixels)), FastDivmod(channels)});
  else
    launch(WideChannels{pixels, channels});
  DLSCALE_CUDA_CHECK(cudaGetLastError());
}

std::size_t nchw_bias_gradient_scratch_bytes(int batch, int channels, std::int64_t pixels) {
  if (batch <= 0 || channels <= 0 || pixels <= 0) return 0;
  return image_sums_scratch_bytes(batch, channels);
}

void relu_mask_and_bias_gradient(int batch, int channels, std::int64_t pixels, const float* y,
                                 const float* dy, float* masked_dy, float* bias_gradient,
                                 void* scratch, cudaStream_t stream) {
  if ((y == nullptr) != (masked_dy == nullptr))
    throw std::invalid_argument("NCHW ReLU mask: y and the masked gradient come together");
  if (masked_dy == nullptr && bias_gradient == nullptr)
    throw std::invalid_argument("NCHW bias gradient: neither a ReLU mask nor a bias to sum");
  if (batch <= 0 || channels <= 0 || pixels <= 0) {
    // Nothing to read: an empty sum is 0.
    if (bias_gradient != nullptr && channels > 0)
      DLSCALE_CUDA_CHECK(
          cudaMemsetAsync(bias_gradient, 0, std::size_t(channels) * sizeof(float), stream));
    return;
  }
  if (bias_gradient != nullptr && scratch == nullptr)
    throw std::invalid_argument("NCHW bias gradient: no scratch for the partial sums");
  const PreparedGradient<float, float> masked{dy, y, masked_dy};
  if (bias_gradient == nullptr) {  // the mask alone: element-wise
    const std::int64_t count = std::int64_t(batch) * channels * pixels;
    elementwise_term_kernel<<<elementwise_grid(count), elementwise_threads, 0, stream>>>(masked,
                                                                                         count);
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  } else if (masked_dy != nullptr) {
    sum_images(masked, StoreSums{bias_gradient}, batch, channels, pixels, scratch, stream);
  } else {
    sum_images(Values<float>{dy}, StoreSums{bias_gradient}, batch, channels, pixels, scratch,
               stream);
  }
}

std::unique_ptr<BatchNormKernel> make_dlscale_batch_norm(const CudaContext& context,
                                                         const BatchNormGeometry& geometry) {
  return std::make_unique<DlscaleBatchNorm>(context, geometry);
}

}  // namespace dlscale::kernels
