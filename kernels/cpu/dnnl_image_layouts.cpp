#include "kernels/cpu/dnnl_image_layouts.hpp"

#include "kernels/cpu/dnnl_check.hpp"

namespace dlscale::kernels {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

struct Candidate {
  tag format;
  int channel_block;
  const char* name;
};
constexpr Candidate candidates[] = {{tag::nChw16c, 16, "nChw16c"},
                                    {tag::nChw8c, 8, "nChw8c"},
                                    {tag::nChw4c, 4, "nChw4c"},
                                    {tag::nhwc, 1, "nhwc"}};

}  // namespace

DnnlImageLayouts::DnnlImageLayouts(const dnnl::engine& engine)
    : native_tag_(tag::nchw), channel_block_(1), native_name_("nchw") {
  // A typical mid-network 3x3 convolution, as in ResNet; its source layout is what oneDNN's
  // fastest kernel for this CPU reads.
  const memory::dims images = {32, 64, 28, 28};
  const memory::desc any_images(images, f32, tag::any);
  const memory::desc any_weights({64, 64, 3, 3}, f32, tag::any);
  const auto probe = DLSCALE_DNNL_CHECK(dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, any_images, any_weights,
                                      memory::desc(), any_images, {1, 1}, {1, 1}, {1, 1}),
      engine));
  for (const Candidate& candidate : candidates) {
    if (memory::desc(images, f32, candidate.format) == probe.src_desc()) {
      native_tag_ = candidate.format;
      channel_block_ = candidate.channel_block;
      native_name_ = candidate.name;
      return;
    }
  }
}

memory::desc DnnlImageLayouts::describe(int batch, const ImageShape& shape,
                                        ImageLayout layout) const {
  const bool native = layout == ImageLayout::native && shape.channels % channel_block_ == 0;
  return memory::desc({batch, shape.channels, shape.height, shape.width}, f32,
                      native ? native_tag_ : tag::nchw);
}

}  // namespace dlscale::kernels
