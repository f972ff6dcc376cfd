// Causal self-attention on cuDNN's scaled-dot-product attention graphs (sdpa and sdpa_backward,
// cuDNN frontend), as PyTorch's scaled_dot_product_attention runs it on its cuDNN backend:
// bf16 Q, K, V and O, float softmax statistics, float accumulation, the causal mask applied
// inside the kernel (top-left diagonal, so query i sees keys 0..i), scale 1/sqrt(head width).
//
// The network keeps its activations in float (as under autocast, the layers around attention
// are float), so each call rounds its inputs into the device's bf16 staging and widens what cuDNN
// wrote: forward rounds x (every step's Q, K and V side by side) and widens O into y; backward
// rounds x again and dO, and widens dQ, dK and dV, written by cuDNN straight into the layout of
// x's gradient. No transpose is needed: the graphs read Q, K and V where they lie, with strides
// (dimensions batch, heads, steps, head width; strides steps x 3 width, head width, 3 width, 1).
// O (bf16) and the statistics live from a forward to its backward, so the kernel owns them.
//
// Backward asks for cuDNN's deterministic algorithm first (replayed steps then repeat bit for
// bit), and takes the other only where that cannot be built (saying so on stderr).
//
// Where the number of steps is no multiple of 128, both graphs carry a padding mask whose
// sequence lengths are all the steps (it masks nothing): cuDNN frontend 1.20 otherwise adds such a
// mask itself on cuDNN 9.15.0 and older, with lengths copied from host memory at every execute,
// which a CUDA graph cannot capture (cudnn-frontend's "workaround padding mask";
// TransformerEngine refuses cuDNN attention under CUDA graphs for that case). Ours are in device
// memory, written once per batch size before any capture.
#include "kernels/cuda/cudnn_attention.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "kernels/cuda/bf16_staging.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cudnn_frontend_check.hpp"
#include "kernels/cuda/cudnn_support.hpp"

namespace dlscale::kernels {

namespace fe = cudnn_frontend;

namespace {

// The uids of the tensors in the graphs' variant packs.
enum Uid : std::int64_t {
  q_uid = 1,
  k_uid,
  v_uid,
  o_uid,
  stats_uid,
  do_uid,
  dq_uid,
  dk_uid,
  dv_uid,
  query_lengths_uid,
  key_lengths_uid
};

using VariantPack = std::unordered_map<std::int64_t, void*>;
using Dims = std::vector<std::int64_t>;

// A graph built for one batch size, and the workspace its plan needs.
struct BuiltGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  std::size_t workspace_bytes = 0;
};

class CudnnAttention final : public AttentionKernel {
 public:
  CudnnAttention(const CudaContext& context, const AttentionGeometry& geometry)
      : context_(context), geometry_(geometry) {
    if (!cudnn_attention_reads(geometry))
      throw UserError(fmt::format(
          "DLSCALE_CUDNN_ATTENTION=sdpa: cuDNN's attention needs a head width that is a multiple "
          "of 8 (this model: width {} over {} heads); unset it for this model",
          geometry.width, geometry.heads));
  }

  void forward(int batch, const float* x, float* y) override {
    Plan& p = plan_for(batch);
    const auto [qkv] = context_.bf16_staging->regions<1>({qkv_count(batch)}, context_.stream);
    round_to_bf16(x, qkv, qkv_count(batch), context_.stream, context_.batched_loads);
    VariantPack pack{{q_uid, qkv},
                     {k_uid, qkv + geometry_.width},
                     {v_uid, qkv + 2 * geometry_.width},
                     {o_uid, p.output.data()},
                     {stats_uid, p.statistics.data()}};
    if (needs_padding_mask()) with_sequence_lengths(p, pack);
    execute(p.forward, pack);
    widen_to_float(p.output.as<__nv_bfloat16>(), y, output_count(batch), context_.stream,
                   context_.batched_loads);
  }

  void backward(int batch, const float* x, const float* output_gradient,
                float* input_gradient) override {
    Plan& p = plan_for(batch);
    const auto [qkv, d_output, d_qkv] = context_.bf16_staging->regions<3>(
        {qkv_count(batch), output_count(batch), qkv_count(batch)}, context_.stream);
    round_to_bf16(x, qkv, qkv_count(batch), context_.stream, context_.batched_loads);
    round_to_bf16(output_gradient, d_output, output_count(batch), context_.stream,
                  context_.batched_loads);
    const int w = geometry_.width;
    VariantPack pack{{q_uid, qkv},
                     {k_uid, qkv + w},
                     {v_uid, qkv + 2 * w},
                     {o_uid, p.output.data()},
                     {stats_uid, p.statistics.data()},
                     {do_uid, d_output},
                     {dq_uid, d_qkv},
                     {dk_uid, d_qkv + w},
                     {dv_uid, d_qkv + 2 * w}};
    if (needs_padding_mask()) with_sequence_lengths(p, pack);
    execute(p.backward, pack);
    // dQ, dK and dV together cover every column of every step: the whole gradient.
    widen_to_float(d_qkv, input_gradient, qkv_count(batch), context_.stream,
                   context_.batched_loads);
  }

 private:
  // What one batch size needs: both graphs, and O and the statistics kept from forward to
  // backward.
  struct Plan {
    BuiltGraph forward, backward;
    DeviceBuffer output;            // O, bf16 [batch x steps x width]
    DeviceBuffer statistics;        // float [batch x heads x steps]: each row's log-sum-exp
    DeviceBuffer sequence_lengths;  // int32 [batch], every one the steps (needs_padding_mask)
  };

  // The padding mask of the file's header: where the steps are no multiple of 128.
  bool needs_padding_mask() const { return geometry_.steps % 128 != 0; }

  std::size_t qkv_count(int batch) const {
    return std::size_t(batch) * geometry_.steps * 3 * geometry_.width;
  }
  std::size_t output_count(int batch) const {
    return std::size_t(batch) * geometry_.steps * geometry_.width;
  }

  Plan& plan_for(int batch) {
    return plan_of(plans_, batch, context_.stream, "cuDNN attention", [&](Plan& p) {
      p.forward = build(make_forward_graph(batch), "forward", batch);
      p.backward = build_backward(batch);
      p.output = DeviceBuffer(output_count(batch) * sizeof(__nv_bfloat16));
      p.statistics =
          DeviceBuffer(std::size_t(batch) * geometry_.heads * geometry_.steps * sizeof(float));
      if (needs_padding_mask()) {
        const std::vector<std::int32_t> lengths(std::size_t(batch), geometry_.steps);
        p.sequence_lengths = DeviceBuffer(lengths.size() * sizeof(std::int32_t));
        DLSCALE_CUDA_CHECK(cudaMemcpy(p.sequence_lengths.data(), lengths.data(),
                                      lengths.size() * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice));
      }
    });
  }

  // [batch, heads, steps, head width] views of Q, K, V (and their gradients) where they lie in a
  // [batch x steps x 3 width] tensor, and of O and dO in a [batch x steps x width] one.
  Dims head_dims(int batch) const {
    return {batch, geometry_.heads, geometry_.steps, geometry_.head_width()};
  }
  Dims strides_in_rows_of(std::int64_t row) const {
    return {geometry_.steps * row, geometry_.head_width(), row, 1};
  }
  Dims qkv_strides() const { return strides_in_rows_of(3 * std::int64_t(geometry_.width)); }
  Dims output_strides() const { return strides_in_rows_of(geometry_.width); }
  Dims statistics_dims(int batch) const { return {batch, geometry_.heads, geometry_.steps, 1}; }
  Dims statistics_strides() const {
    return {std::int64_t(geometry_.heads) * geometry_.steps, geometry_.steps, 1, 1};
  }
  float scale() const { return float(1 / std::sqrt(double(geometry_.head_width()))); }

  // The padding mask's sequence lengths of queries and of keys: [batch, 1, 1, 1] int32 each,
  // both read from the plan's one buffer (every length is the steps).
  template <typename Attributes>
  void add_padding_mask(fe::graph::Graph& graph, int batch, Attributes& attributes) const {
    const auto lengths = [&](const char* name, Uid uid) {
      return graph.tensor(fe::graph::Tensor_attributes()
                              .set_name(name)
                              .set_uid(uid)
                              .set_dim({batch, 1, 1, 1})
                              .set_stride({1, 1, 1, 1})
                              .set_data_type(fe::DataType_t::INT32));
    };
    attributes.set_padding_mask(true)
        .set_seq_len_q(lengths("query_lengths", query_lengths_uid))
        .set_seq_len_kv(lengths("key_lengths", key_lengths_uid));
  }
  static void with_sequence_lengths(Plan& p, VariantPack& pack) {
    pack[query_lengths_uid] = p.sequence_lengths.data();
    pack[key_lengths_uid] = p.sequence_lengths.data();
  }

  static std::shared_ptr<fe::graph::Graph> new_graph() {
    auto graph = std::make_shared<fe::graph::Graph>();
    graph->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return graph;
  }
  static std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& graph,
                                                             const char* name, Uid uid,
                                                             const Dims& dims,
                                                             const Dims& strides) {
    return graph.tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(
            strides));
  }
  static void output(fe::graph::Tensor_attributes& tensor, Uid uid, const Dims& dims,
                     const Dims& strides) {
    tensor.set_output(true).set_uid(uid).set_dim(dims).set_stride(strides);
  }

  std::shared_ptr<fe::graph::Graph> make_forward_graph(int batch) const {
    auto graph = new_graph();
    const Dims dims = head_dims(batch);
    auto attributes = fe::graph::SDPA_attributes()
                          .set_name("attention")
                          .set_generate_stats(true)
                          .set_attn_scale(scale())
                          .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                          .set_diagonal_band_right_bound(0);
    if (needs_padding_mask()) add_padding_mask(*graph, batch, attributes);
    auto [o, statistics] = graph->sdpa(input(*graph, "q", q_uid, dims, qkv_strides()),
                                       input(*graph, "k", k_uid, dims, qkv_strides()),
                                       input(*graph, "v", v_uid, dims, qkv_strides()), attributes);
    output(*o, o_uid, dims, output_strides());
    output(*statistics, stats_uid, statistics_dims(batch), statistics_strides());
    statistics->set_data_type(fe::DataType_t::FLOAT);
    return graph;
  }

  std::shared_ptr<fe::graph::Graph> make_backward_graph(int batch, bool deterministic) const {
    auto graph = new_graph();
    const Dims dims = head_dims(batch);
    auto statistics =
        input(*graph, "statistics", stats_uid, statistics_dims(batch), statistics_strides());
    statistics->set_data_type(fe::DataType_t::FLOAT);
    auto attributes = fe::graph::SDPA_backward_attributes()
                          .set_name("attention_backward")
                          .set_attn_scale(scale())
                          .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                          .set_diagonal_band_right_bound(0)
                          .set_deterministic_algorithm(deterministic);
    if (needs_padding_mask()) add_padding_mask(*graph, batch, attributes);
    auto [dq, dk, dv] = graph->sdpa_backward(input(*graph, "q", q_uid, dims, qkv_strides()),
                                             input(*graph, "k", k_uid, dims, qkv_strides()),
                                             input(*graph, "v", v_uid, dims, qkv_strides()),
                                             input(*graph, "o", o_uid, dims, output_strides()),
                                             input(*graph, "do", do_uid, dims, output_strides()),
                                             statistics, attributes);
    output(*dq, dq_uid, dims, qkv_strides());
    output(*dk, dk_uid, dims, qkv_strides());
    output(*dv, dv_uid, dims, qkv_strides());
    return graph;
  }

  BuiltGraph build_backward(int batch) {
    std::string why;
    if (BuiltGraph built = try_build(make_backward_graph(batch, true), why); built.graph)
      return built;
    // Replayed steps will not repeat bit for bit: say so, with cuDNN's reason.
    std::fprintf(stderr,
                 "dlscale: cuDNN attention: no deterministic backward for batch %d, %d steps, %d "
                 "heads of %d (%s); using the non-deterministic one\n",
                 batch, geometry_.steps, geometry_.heads, geometry_.head_width(), why.c_str());
    return build(make_backward_graph(batch, false), "backward", batch);
  }

  // The graph's first engine by cuDNN's heuristics (mode A, then the fallback list), built; a
  // UserError naming the shape where cuDNN has none, and the setting that avoids it.
  BuiltGraph build(std::shared_ptr<fe::graph::Graph> graph, const char* pass, int batch) {
    std::string why;
    BuiltGraph built = try_build(std::move(graph), why);
    if (!built.graph)
      throw UserError(
          fmt::format("{}: cuDNN runs no {} attention for batch {}, {} steps, {} heads of {} ({}); "
                      "DLSCALE_CUDNN_ATTENTION=gemm runs the composed attention",
                      context_.attention_asked ? "DLSCALE_CUDNN_ATTENTION=sdpa"
                                               : "cuDNN's fused attention (the default under bf16)",
                      pass, batch, geometry_.steps, geometry_.heads, geometry_.head_width(), why));
    return built;
  }

  BuiltGraph try_build(std::shared_ptr<fe::graph::Graph> graph, std::string& why) {
    BuiltGraph built;
    const auto failed = [&](fe::error_t status) {
      if (status.is_good()) return false;
      why = status.get_message();
      return true;
    };
    if (failed(graph->validate()) || failed(graph->build_operation_graph(context_.cudnn)) ||
        failed(graph->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})) ||
        failed(graph->check_support()) ||
        failed(graph->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE)))
      return built;
    std::int64_t workspace_bytes = 0;
    DLSCALE_CUDNN_FRONTEND_CHECK(graph->get_workspace_size(workspace_bytes));
    built.workspace_bytes = std::size_t(workspace_bytes);
    built.graph = std::move(graph);
    return built;
  }

  void execute(const BuiltGraph& built, VariantPack& pack) {
    if (workspace_.size() < built.workspace_bytes) {
      require_not_capturing(context_.stream, "cuDNN attention workspace");
      // A graph captured earlier may still point into the old one: keep it.
      outgrown_.push_back(std::move(workspace_));
      workspace_ = DeviceBuffer(built.workspace_bytes);
    }
    DLSCALE_CUDNN_FRONTEND_CHECK(built.graph->execute(context_.cudnn, pack, workspace_.data()));
  }

  CudaContext context_;
  AttentionGeometry geometry_;
  std::map<int, Plan> plans_;  // by batch size
  DeviceBuffer workspace_;
  std::vector<DeviceBuffer> outgrown_;
};

}  // namespace

bool cudnn_attention_reads(const AttentionGeometry& geometry) {
  return geometry.heads >= 1 && geometry.width % geometry.heads == 0 &&
         geometry.head_width() % 8 == 0;
}

bool cudnn_attention_runs_everywhere(const AttentionGeometry& geometry,
                                     int compute_capability_major) {
  return cudnn_attention_reads(geometry) && geometry.head_width() <= 128 &&
         compute_capability_major >= 8;
}

std::unique_ptr<AttentionKernel> make_cudnn_attention(const CudaContext& context,
                                                      const AttentionGeometry& geometry) {
  open_cudnn_for_the_frontend();
  return std::make_unique<CudnnAttention>(context, geometry);
}

}  // namespace dlscale::kernels
