// Built-in workloads, with the shapes and CPU batch sizes of docs/workloads.md.
#include "workloads/workload_registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/nearest_name.hpp"
#include "workloads/cnn_zoo.hpp"
#include "workloads/fcn_workload.hpp"
#include "workloads/gpt_workload.hpp"
#include "workloads/lstm_workload.hpp"

namespace dlscale::workloads {

std::vector<std::unique_ptr<Workload>> builtin_workloads() {
  std::vector<std::unique_ptr<Workload>> all;
  all.push_back(std::make_unique<FcnWorkload>(
      "fcn-s", std::vector<int>{26752, 2048, 2048, 2048, 2048, 26752}, 64));
  all.push_back(
      std::make_unique<FcnWorkload>("fcn-r", std::vector<int>{784, 2048, 4096, 1024, 10}, 1024));
  for (auto& workload : convolutional_workloads()) all.push_back(std::move(workload));
  // 2-layer word-level language models of the reference study: vocabulary 10000, 512 wide.
  for (const int steps : {32, 64})
    all.push_back(
        std::make_unique<LstmWorkload>(fmt::format("lstm-{}", steps), steps, 512, 2, 10000, 128));
  // Decoder-only transformers: a small one for tests, and GPT-2 small and medium (124 M and 350 M
  // parameters, as Hugging Face's GPT2LMHeadModel counts them).
  all.push_back(std::make_unique<GptWorkload>("gpt-tiny", GptShape{2, 64, 4, 32, 128}, 16));
  all.push_back(std::make_unique<GptWorkload>("gpt2-small", GptShape{12, 768, 12, 1024, 50257}, 8));
  all.push_back(
      std::make_unique<GptWorkload>("gpt2-medium", GptShape{24, 1024, 16, 1024, 50257}, 4));
  return all;
}

std::unique_ptr<Workload> make_workload(const std::string& name_or_spec) {
  constexpr std::string_view fcn_prefix = "fcn:", lstm_prefix = "lstm:", gpt_prefix = "gpt:";
  if (name_or_spec.starts_with(fcn_prefix))
    return parse_fcn_spec(name_or_spec.substr(fcn_prefix.size()));
  if (name_or_spec.starts_with(lstm_prefix))
    return parse_lstm_spec(name_or_spec.substr(lstm_prefix.size()));
  if (name_or_spec.starts_with(gpt_prefix))
    return parse_gpt_spec(name_or_spec.substr(gpt_prefix.size()));
  std::vector<std::string> known;
  for (auto& workload : builtin_workloads()) {
    if (workload->name() == name_or_spec) return std::move(workload);
    known.push_back(workload->name());
  }
  throw UserError(
      fmt::format("--model: unknown model '{}'{} (built-in: {}; or fcn:INPUT,HIDDEN,...,CLASSES or "
                  "lstm:SEQ,HIDDEN,LAYERS,VOCAB or gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY; see "
                  "--list-models)",
                  name_or_spec, did_you_mean(name_or_spec, known), fmt::join(known, ", ")));
}

}  // namespace dlscale::workloads
