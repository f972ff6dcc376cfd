// One oneDNN primitive per (operation, size), made at first use: a training step repeats the
// same few sizes, so after the first step each call is a map lookup and an execute.
#include "kernels/cpu/dnnl_elementwise.hpp"

#include "kernels/cpu/dnnl_check.hpp"
#include "kernels/cpu/dnnl_support.hpp"

namespace dlscale::kernels {

namespace {

dnnl::memory::desc vector_desc(std::size_t count) {
  return dnnl::memory::desc({dnnl::memory::dim(count)}, dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::a);
}

}  // namespace

DnnlElementwise::DnnlElementwise(const dnnl::engine& engine, dnnl::stream& stream)
    : engine_(engine), stream_(stream) {}

void DnnlElementwise::run_eltwise(dnnl::algorithm algorithm, std::size_t count, const float* x,
                                  float* y) {
  if (count == 0) return;
  const dnnl::memory::desc desc = vector_desc(count);
  auto found = eltwise_.find({algorithm, count});
  if (found == eltwise_.end()) {
    const dnnl::eltwise_forward::primitive_desc description = DLSCALE_DNNL_CHECK(
        dnnl::eltwise_forward::primitive_desc(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, algorithm, desc),
            engine_));
    found = eltwise_.emplace(std::pair{algorithm, count},
                             DLSCALE_DNNL_CHECK(dnnl::eltwise_forward(description)))
                .first;
  }
  DLSCALE_DNNL_CHECK(found->second.execute(
      stream_, {{DNNL_ARG_SRC, wrap(desc, engine_, x)}, {DNNL_ARG_DST, wrap(desc, engine_, y)}}));
  stream_.wait();
}

void DnnlElementwise::logistic(std::size_t count, const float* x, float* y) {
  run_eltwise(dnnl::algorithm::eltwise_logistic, count, x, y);
}

void DnnlElementwise::exp(std::size_t count, const float* x, float* y) {
  run_eltwise(dnnl::algorithm::eltwise_exp, count, x, y);
}

void DnnlElementwise::log_softmax(int rows, int columns, const float* x, float* y) {
  if (rows == 0) return;
  const dnnl::memory::desc desc({rows, columns}, dnnl::memory::data_type::f32,
                                dnnl::memory::format_tag::ab);
  auto found = log_softmax_.find({rows, columns});
  if (found == log_softmax_.end()) {
    const dnnl::logsoftmax_forward::primitive_desc description = DLSCALE_DNNL_CHECK(
        dnnl::logsoftmax_forward::primitive_desc(
            dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_inference, desc, 1),
            engine_));
    found = log_softmax_.emplace(std::pair{rows, columns},
                                 DLSCALE_DNNL_CHECK(dnnl::logsoftmax_forward(description)))
                .first;
  }
  DLSCALE_DNNL_CHECK(found->second.execute(
      stream_, {{DNNL_ARG_SRC, wrap(desc, engine_, x)}, {DNNL_ARG_DST, wrap(desc, engine_, y)}}));
  stream_.wait();
}

}  // namespace dlscale::kernels
