// The memory layouts of image batches for the oneDNN kernels (see ImageLayout). `native` is the
// activation layout oneDNN's own convolution picks on this CPU: nChw8c with AVX2, nChw16c with
// AVX-512. It is found once, by asking oneDNN, rather than guessed from the ISA.
#pragma once

#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/image_kernels.hpp"

namespace dlscale::kernels {

class DnnlImageLayouts {
 public:
  explicit DnnlImageLayouts(const dnnl::engine& engine);

  // A batch of images in `layout`. Blocked layouts need whole blocks of channels; a tensor
  // without them (the 3-channel input) is plain nchw, so no buffer ever carries padding.
  dnnl::memory::desc describe(int batch, const ImageShape& shape, ImageLayout layout) const;
  const std::string& native_name() const { return native_name_; }

 private:
  dnnl::memory::format_tag native_tag_;
  int channel_block_;
  std::string native_name_;
};

}  // namespace dlscale::kernels
