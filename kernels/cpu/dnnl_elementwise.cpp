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

namespace {

// Runs the cached primitive for `key`, made by `make` (a primitive_desc) the first time, reading
// x and writing y, both of layout `desc`.
template <typename Primitive, typename Key, typename MakeDescription>
void run_cached(std::map<Key, Primitive>& cache, const Key& key, MakeDescription make,
                const dnnl::memory::desc& desc, const dnnl::engine& engine, dnnl::stream& stream,
                const float* x, float* y) {
  auto found = cache.find(key);
  if (found == cache.end()) {
    require_address_space_for_a_primitive();
    found = cache.emplace(key, DLSCALE_DNNL_CHECK(Primitive(DLSCALE_DNNL_CHECK(make())))).first;
  }
  DLSCALE_DNNL_CHECK(found->second.execute(
      stream, {{DNNL_ARG_SRC, wrap(desc, engine, x)}, {DNNL_ARG_DST, wrap(desc, engine, y)}}));
  stream.wait();
}

}  // namespace

void DnnlElementwise::run_eltwise(dnnl::algorithm algorithm, std::size_t count, const float* x,
                                  float* y) {
  if (count == 0) return;
  const dnnl::memory::desc desc = vector_desc(count);
  run_cached(
      eltwise_, std::pair{algorithm, count},
      [&] {
        return dnnl::eltwise_forward::primitive_desc(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, algorithm, desc),
            engine_);
      },
      desc, engine_, stream_, x, y);
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
  run_cached(
      log_softmax_, std::pair{rows, columns},
      [&] {
        return dnnl::logsoftmax_forward::primitive_desc(
            dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_inference, desc, 1), engine_);
      },
      desc, engine_, stream_, x, y);
}

void DnnlElementwise::softmax(int rows, int columns, const float* x, float* y) {
  if (rows == 0) return;
  const dnnl::memory::desc desc({rows, columns}, dnnl::memory::data_type::f32,
                                dnnl::memory::format_tag::ab);
  run_cached(
      softmax_, std::pair{rows, columns},
      [&] {
        return dnnl::softmax_forward::primitive_desc(
            dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, desc, 1), engine_);
      },
      desc, engine_, stream_, x, y);
}

void DnnlElementwise::gelu(std::size_t count, const float* x, float* y) {
  run_eltwise(dnnl::algorithm::eltwise_gelu_tanh, count, x, y);
}

void DnnlElementwise::gelu_backward(std::size_t count, const float* x, const float* dy, float* dx) {
  if (count == 0) return;
  const dnnl::memory::desc desc = vector_desc(count);
  auto found = gelu_backward_.find(count);
  if (found == gelu_backward_.end()) {
    require_address_space_for_a_primitive();
    // oneDNN makes a backward primitive from the forward one it follows.
    const auto forward = DLSCALE_DNNL_CHECK(dnnl::eltwise_forward::primitive_desc(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training,
                                    dnnl::algorithm::eltwise_gelu_tanh, desc),
        engine_));
    found = gelu_backward_
                .emplace(count, DLSCALE_DNNL_CHECK(dnnl::eltwise_backward(
                                    DLSCALE_DNNL_CHECK(dnnl::eltwise_backward::primitive_desc(
                                        dnnl::eltwise_backward::desc(
                                            dnnl::algorithm::eltwise_gelu_tanh, desc, desc),
                                        engine_, forward)))))
                .first;
  }
  DLSCALE_DNNL_CHECK(
      found->second.execute(stream_, {{DNNL_ARG_SRC, wrap(desc, engine_, x)},
                                      {DNNL_ARG_DIFF_DST, wrap(desc, engine_, dy)},
                                      {DNNL_ARG_DIFF_SRC, wrap(desc, engine_, dx)}}));
  stream_.wait();
}

}  // namespace dlscale::kernels
