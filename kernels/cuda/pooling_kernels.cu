// dlscale's pooling kernels (pooling_kernels.hpp). Forward: one thread per output element,
// enumerated in the input's layout order, so that a warp reads 32 channels of one pixel (NHWC) or
// 32 pixels of one row (NCHW); backward: one thread per input element, likewise. A window position
// fits a byte (kernels up to 15 x 15).
#include "kernels/cuda/pooling_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <type_traits>

#include "core/fast_divmod.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cudnn_support.hpp"
#include "kernels/cuda/element_values.cuh"

namespace dlscale::kernels {

namespace {

constexpr int threads = 256;
constexpr int most_blocks = 132 * 32;  // grid-stride loops: enough to fill any one GPU

// Where element (n, c, h, w) of a batch of images lies, NHWC or NCHW.
struct Strides {
  std::int64_t n, c, h, w;
  __host__ __device__ std::int64_t at(std::int64_t n_, int c_, int h_, int w_) const {
    return n_ * n + c_ * c + std::int64_t(h_) * h + std::int64_t(w_) * w;
  }
};

Strides strides_of(const ImageShape& shape, bool nhwc) {
  const std::int64_t plane = std::int64_t(shape.height) * shape.width;
  return nhwc ? Strides{plane * shape.channels, 1, std::int64_t(shape.width) * shape.channels,
                        shape.channels}
              : Strides{plane * shape.channels, plane, shape.width, 1};
}

struct Window {
  int channels, in_height, in_width, out_height, out_width, kernel, stride, padding;
  bool max;
};

// How a kernel splits the flat index i of an NHWC tensor [n, height, width, channels] (Nhwc) or of
// an NCHW one [n, channels, height, width] into its coordinates, and divides by the window's
// stride: by 64-bit integer division (any size), or,
// with DLSCALE_CUDA_FAST_DIVMOD=yes and tensors under 2^31 elements, by FastDivmod's multiply
// and shift, the same values (fast_divmod.hpp). Integer division is most of these kernels' work:
// alexnet-r's first max pooling backward (34 million inputs, each gathering from up to four
// windows) took 0.48 ms on the H200 where its bytes need 0.04.
template <bool Nhwc>
struct WideIndexing {
  int channels, width, height, stride;
  __device__ void split(std::int64_t i, std::int64_t& n, int& h, int& w, int& c) const {
    if constexpr (Nhwc) {
      c = int(i % channels);
      std::int64_t rest = i / channels;
      w = int(rest % width);
      rest /= width;
      h = int(rest % height);
      n = rest / height;
    } else {
      w = int(i % width);
      std::int64_t rest = i / width;
      h = int(rest % height);
      rest /= height;
      c = int(rest % channels);
      n = rest / channels;
    }
  }
  __device__ int over_stride(int x) const { return x / stride; }
};

template <bool Nhwc>
struct FastIndexing {
  FastDivmod channels, width, height, stride;
  __device__ void split(std::int64_t i, std::int64_t& n, int& h, int& w, int& c) const {
    if constexpr (Nhwc) {
      int rest = channels.divide(int(i), c);
      rest = width.divide(rest, w);
      n = height.divide(rest, h);
    } else {
      int rest = width.divide(int(i), w);
      rest = height.divide(rest, h);
      n = channels.divide(rest, c);
    }
  }
  __device__ int over_stride(int x) const { return stride.quotient(x); }
};

// y at `out` strides from x at `in` strides; for max pooling, the winner's position in its window
// per output element, in the order the outputs are enumerated (the input's layout). In and Out:
// float, or bf16 for bf16 images (values compared and summed in float).
template <typename In, typename Out, typename Indexing>
__global__ void pooling_forward_kernel(const In* x, Out* y, std::uint8_t* positions, Window g,
                                       Strides in, Strides out, std::int64_t count,
                                       Indexing outputs) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t n;
    int oh, ow, c;
    outputs.split(i, n, oh, ow, c);
    const int h0 = oh * g.stride - g.padding, w0 = ow * g.stride - g.padding;
    float best = 0.0f, sum = 0.0f;
    int best_position = -1;
    for (int kh = 0; kh < g.kernel; ++kh) {
      const int h = h0 + kh;
      if (h < 0 || h >= g.in_height) continue;
      for (int kw = 0; kw < g.kernel; ++kw) {
        const int w = w0 + kw;
        if (w < 0 || w >= g.in_width) continue;
        const float value = load_float(x[in.at(n, c, h, w)]);
        sum += value;
        if (best_position < 0 || value > best) {
          best = value;
          best_position = kh * g.kernel + kw;
        }
      }
    }
    if (g.max) {
      positions[i] = std::uint8_t(best_position < 0 ? 0 : best_position);
      y[out.at(n, c, oh, ow)] = store_float<Out>(best);
    } else {
      y[out.at(n, c, oh, ow)] = store_float<Out>(sum / float(g.kernel * g.kernel));
    }
  }
}

// dx (in the input's layout, enumerated in it) from dy at `out` strides, the window positions at
// `positions_at` (the output's coordinates in the input's layout): each input gathers from every
// window that holds it, rows of windows in order, then columns, in float. dy has y's type (Out),
// dx x's (In).
template <typename In, typename Out, typename Indexing>
__global__ void pooling_backward_kernel(const Out* dy, const std::uint8_t* positions, In* dx,
                                        Window g, Strides out, Strides positions_at,
                                        std::int64_t count, Indexing inputs) {
  const float average_share = 1.0f / float(g.kernel * g.kernel);
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t n;
    int h, w, c;
    inputs.split(i, n, h, w, c);
    // Windows oh with oh * stride - padding <= h < oh * stride - padding + kernel. (A
    // numerator below 1 gives window 0, as max(0, numerator / stride) with C++'s division.)
    const int h_after = h + g.padding - g.kernel + g.stride;
    const int w_after = w + g.padding - g.kernel + g.stride;
    const int oh_first = h_after > 0 ? inputs.over_stride(h_after) : 0;
    const int oh_last = min(g.out_height - 1, inputs.over_stride(h + g.padding));
    const int ow_first = w_after > 0 ? inputs.over_stride(w_after) : 0;
    const int ow_last = min(g.out_width - 1, inputs.over_stride(w + g.padding));
    float gradient = 0.0f;
    for (int oh = oh_first; oh <= oh_last; ++oh) {
      const int kh = h - (oh * g.stride - g.padding);
      for (int ow = ow_first; ow <= ow_last; ++ow) {
        const int kw = w - (ow * g.stride - g.padding);
        const float from = load_float(dy[out.at(n, c, oh, ow)]);
        if (!g.max) {
          gradient += from * average_share;
        } else {
          if (positions[positions_at.at(n, c, oh, ow)] == kh * g.kernel + kw) gradient += from;
        }
      }
    }
    dx[i] = store_float<In>(gradient);
  }
}

unsigned grid_for(std::int64_t count) {
  return unsigned(std::clamp<std::int64_t>((count + threads - 1) / threads, 1, most_blocks));
}

class DlscalePooling final : public PoolingKernel {
 public:
  DlscalePooling(const CudaContext& context, const PoolingGeometry& geometry)
      : context_(context), geometry_(geometry) {
    if (!dlscale_pooling_supports(geometry))
      throw std::invalid_argument(
          "dlscale's pooling: kernels of 1 to 15 pixels a side, a stride of at least 1 and "
          "padding below the kernel only");
    const ImageShape out = geometry.output();
    window_ = {geometry.input.channels,
               geometry.input.height,
               geometry.input.width,
               out.height,
               out.width,
               geometry.kernel,
               geometry.stride,
               geometry.padding,
               geometry.kind == PoolingKind::max};
    in_nhwc_ = geometry.input_layout == ImageLayout::native && context.native_is_nhwc();
    const bool out_nhwc = geometry.output_layout == ImageLayout::native && context.native_is_nhwc();
    in_ = strides_of(geometry.input, in_nhwc_);
    out_ = strides_of(out, out_nhwc);
    positions_at_ = strides_of(out, in_nhwc_);
    in_bf16_ = geometry.input_layout == ImageLayout::native && context.native_is_bf16();
    out_bf16_ = geometry.output_layout == ImageLayout::native && context.native_is_bf16();
  }

  void forward(int batch, const float* x, float* y) override {
    const std::int64_t count = std::int64_t(batch) * geometry_.output().size();
    if (count == 0) return;
    std::uint8_t* positions = positions_for(batch);
    with_types(x, y, [&](const auto* in, auto* out) {
      with_indexing(batch, window_.out_width, window_.out_height, [&](auto outputs) {
        pooling_forward_kernel<<<grid_for(count), threads, 0, context_.stream>>>(
            in, out, positions, window_, in_, out_, count, outputs);
      });
    });
    DLSCALE_CUDA_CHECK(cudaGetLastError());
    forwarded_ = true;
  }

  void backward(int batch, const float* output_gradient, float* input_gradient) override {
    if (!forwarded_) throw std::logic_error("dlscale's pooling: backward before forward");
    const std::int64_t count = std::int64_t(batch) * geometry_.input.size();
    if (count == 0) return;
    const std::uint8_t* positions = positions_for(batch);
    with_types(input_gradient, output_gradient, [&](auto* dx, const auto* dy) {
      with_indexing(batch, window_.in_width, window_.in_height, [&](auto inputs) {
        pooling_backward_kernel<<<grid_for(count), threads, 0, context_.stream>>>(
            dy, positions, dx, window_, out_, positions_at_, count, inputs);
      });
    });
    DLSCALE_CUDA_CHECK(cudaGetLastError());
  }

 private:
  // Calls run(in, out) with the input-side and output-side tensors as the types they hold: bf16
  // where they are native images of a device that keeps those in bf16, else float.
  template <typename InSide, typename OutSide, typename Run>
  void with_types(InSide* in, OutSide* out, Run&& run) const {
    using InBf16 = std::conditional_t<std::is_const_v<InSide>, const __nv_bfloat16, __nv_bfloat16>;
    using OutBf16 =
        std::conditional_t<std::is_const_v<OutSide>, const __nv_bfloat16, __nv_bfloat16>;
    const auto in_bf16 = reinterpret_cast<InBf16*>(in);
    const auto out_bf16 = reinterpret_cast<OutBf16*>(out);
    if (in_bf16_ && out_bf16_)
      run(in_bf16, out_bf16);
    else if (in_bf16_)
      run(in_bf16, out);
    else if (out_bf16_)
      run(in, out_bf16);
    else
      run(in, out);
  }

  // Calls run(indexing) with the indexing, in the input's layout, of a tensor of this width and
  // height (the input's or the output's): FastIndexing where the setting asks for it and both
  // tensors of the batch have fewer than 2^31 elements, else WideIndexing.
  template <typename Run>
  void with_indexing(int batch, int width, int height, Run&& run) const {
    constexpr std::int64_t fast_below = std::int64_t(1) << 31;
    const std::int64_t largest =
        std::int64_t(batch) *
        std::int64_t(std::max(geometry_.input.size(), geometry_.output().size()));
    const bool fast = context_.fast_divmod && largest < fast_below;
    const auto in_layout = [&](auto nhwc) {
      constexpr bool Nhwc = decltype(nhwc)::value;
      if (fast)
        run(FastIndexing<Nhwc>{FastDivmod(window_.channels), FastDivmod(width), FastDivmod(height),
                               FastDivmod(window_.stride)});
      else
        run(WideIndexing<Nhwc>{window_.channels, width, height, window_.stride});
    };
    if (in_nhwc_)
      in_layout(std::true_type{});
    else
      in_layout(std::false_type{});
  }

  // Max pooling's window positions for a batch size, made on its first call (before capture).
  std::uint8_t* positions_for(int batch) {
    if (!window_.max) return nullptr;
    return plan_of(positions_, batch, context_.stream, "dlscale's pooling",
                   [&](DeviceBuffer& b) {
                     b = DeviceBuffer(std::size_t(batch) * geometry_.output().size());
                   })
        .as<std::uint8_t>();
  }

  CudaContext context_;
  PoolingGeometry geometry_;
  Window window_{};
  bool in_nhwc_ = false;    // x and dx in NHWC (else NCHW); the threads enumerate that order
  Strides in_{}, out_{};    // x and dx, y and dy
  Strides positions_at_{};  // max pooling's window positions: y's shape in the input's layout
  bool in_bf16_ = false, out_bf16_ = false;  // x and dx, y and dy: bf16 images (else float)
  std::map<int, DeviceBuffer> positions_;    // by batch size
  bool forwarded_ = false;
};

}  // namespace

bool dlscale_pooling_supports(const PoolingGeometry& geometry) {
  return geometry.kernel >= 1 && geometry.kernel <= 15 && geometry.stride >= 1 &&
         geometry.padding >= 0 && geometry.padding < geometry.kernel;
}

std::unique_ptr<PoolingKernel> make_dlscale_pooling(const CudaContext& context,
                                                    const PoolingGeometry& geometry) {
  return std::make_unique<DlscalePooling>(context, geometry);
}

}  // namespace dlscale::kernels
