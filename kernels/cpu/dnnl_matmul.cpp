// One matmul primitive per GEMM shape: a training step repeats the same few shapes, so after the
// first step every GEMM is a map lookup and an execute.
#include "kernels/cpu/dnnl_matmul.hpp"

#include "kernels/cpu/dnnl_check.hpp"

namespace dlscale::kernels {

namespace {

using tag_dims = dnnl::memory::dims;

// A row-major rows x cols matrix with leading dimension ld, or its transpose stored that way;
// with count > 1, count of them, each `stride` values after the one before.
dnnl::memory::desc matrix(int rows, int cols, int ld, bool transposed, int count,
                          std::ptrdiff_t stride) {
  const tag_dims strides = transposed ? tag_dims{1, ld} : tag_dims{ld, 1};
  if (count == 1) return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32, strides);
  return dnnl::memory::desc({count, rows, cols}, dnnl::memory::data_type::f32,
                            {stride, strides[0], strides[1]});
}

}  // namespace

DnnlMatmul::DnnlMatmul(const dnnl::engine& engine, dnnl::stream& stream,
                       dnnl::memory::data_type inputs)
    : engine_(engine), stream_(stream), inputs_(inputs) {}

DnnlMatmul::Prepared& DnnlMatmul::prepared(const Shape& shape) {
  const auto found = primitives_.find(shape);
  if (found != primitives_.end()) return found->second;
  const auto [transpose_a, transpose_b, m, n, k, lda, ldb, ldc, alpha, beta, count, stride_a,
              stride_b, stride_c] = shape;
  Prepared made{{},
                matrix(m, k, lda, transpose_a, count, stride_a),
                matrix(k, n, ldb, transpose_b, count, stride_b),
                matrix(m, n, ldc, false, count, stride_c),
                {},
                {}};
  // Float inputs are read where they lie; bf16 ones from a dense copy the stage converts into,
  // stored in the order the float one is (a transposed operand stays transposed: converting is
  // then a straight pass over memory, not a transpose, and the matmul reads either order).
  const auto read = [&](const dnnl::memory::desc& given, bool transposed) {
    using tag = dnnl::memory::format_tag;
    if (inputs_ == dnnl::memory::data_type::f32) return given;
    const tag order =
        count == 1 ? (transposed ? tag::ba : tag::ab) : (transposed ? tag::acb : tag::abc);
    return dnnl::memory::desc(given.dims(), inputs_, order);
  };
  made.a_read = LayoutStage(read(made.a, transpose_a));
  made.b_read = LayoutStage(read(made.b, transpose_b));
  dnnl::primitive_attr attributes;
  if (alpha != 1.0f) attributes.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attributes.set_post_ops(sum);
  }
  const dnnl::matmul::primitive_desc description = DLSCALE_DNNL_CHECK(dnnl::matmul::primitive_desc(
      dnnl::matmul::desc(read(made.a, transpose_a), read(made.b, transpose_b), made.c), attributes,
      engine_));
  require_address_space_for_a_primitive();
  made.primitive = DLSCALE_DNNL_CHECK(dnnl::matmul(description));
  return primitives_.emplace(shape, std::move(made)).first->second;
}

void DnnlMatmul::multiply_batched(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                                  float alpha, const float* a, int lda, std::ptrdiff_t stride_a,
                                  const float* b, int ldb, std::ptrdiff_t stride_b, float beta,
                                  float* c, int ldc, std::ptrdiff_t stride_c, int count) {
  if (m == 0 || n == 0 || count <= 0) return;
  // One matrix needs no strides: every single GEMM shares its primitive whatever they were.
  if (count == 1) stride_a = stride_b = stride_c = 0;
  Prepared& p = prepared({transpose_a == Transpose::yes, transpose_b == Transpose::yes, m, n, k,
                          lda, ldb, ldc, alpha, beta, count, stride_a, stride_b, stride_c});
  // oneDNN reads its inputs through non-const handles; it does not write them.
  dnnl::memory a_memory(p.a, engine_, const_cast<float*>(a));
  dnnl::memory b_memory(p.b, engine_, const_cast<float*>(b));
  dnnl::memory c_memory(p.c, engine_, c);
  DLSCALE_DNNL_CHECK(
      p.primitive.execute(stream_, {{DNNL_ARG_SRC, p.a_read.source(a_memory, engine_, stream_)},
                                    {DNNL_ARG_WEIGHTS, p.b_read.source(b_memory, engine_, stream_)},
                                    {DNNL_ARG_DST, c_memory}}));
  stream_.wait();
}

}  // namespace dlscale::kernels
