// Word-level LSTM language models (LSTM-32, LSTM-64 and user-defined sizes): embedding, stacked
// LSTM layers, and a dense layer to the vocabulary at every step, with the loss over all steps.
#pragma once

#include "kernels/sequence_kernels.hpp"
#include "workloads/workload.hpp"

namespace dlscale::workloads {

class LstmWorkload final : public Workload {
 public:
  // The embedding width equals the hidden size, as in the reference (512 and 512).
  LstmWorkload(std::string name, int steps, int hidden, int layers, int vocabulary,
               int default_batch);

  std::string name() const override { return name_; }
  std::string family() const override { return "RNN"; }
  std::string description() const override;
  std::size_t parameter_count() const override;
  double training_flops_per_sample() const override;
  int default_batch() const override { return default_batch_; }
  std::size_t input_size() const override { return std::size_t(steps_); }
  int tokens_per_sample() const override { return steps_; }
  std::vector<model::LayerShape> layer_shapes() const override;

  std::unique_ptr<model::Network<float>> build_network(kernels::Device& device,
                                                       int batch) const override;
  HostBatch make_batch(int batch, std::uint64_t seed, int rank, int batch_index,
                       int threads = 1) const override;
  double best_accuracy(std::uint64_t seed) const override;
  double best_loss(std::uint64_t seed) const override;

 private:
  kernels::LstmGeometry lstm_geometry() const { return {steps_, hidden_, hidden_, 1}; }

  std::string name_;
  int steps_, hidden_, layers_, vocabulary_;
  int default_batch_;
};

// Parses "lstm:SEQ,HIDDEN,LAYERS,VOCAB" (the part after "lstm:"). Throws UserError naming it.
std::unique_ptr<LstmWorkload> parse_lstm_spec(const std::string& spec);

}  // namespace dlscale::workloads
