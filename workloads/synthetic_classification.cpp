// Prototype-plus-noise samples from counter-based random numbers: nothing is stored per class, so
// a model with tens of thousands of classes and inputs (fcn-s) costs no memory for its data model.
#include "workloads/synthetic_classification.hpp"

#include <algorithm>
#include <limits>

#include "core/random.hpp"

namespace dlscale::workloads {

namespace {
constexpr std::uint64_t prototype_stream = 0x9e0707e5;
constexpr std::uint64_t sample_stream_base = 0x5a3b1e0000000000ULL;
constexpr double noise_stddev = 1.0;
}  // namespace

HostBatch make_prototype_batch(int batch, int input_size, int classes, std::uint64_t seed, int rank,
                               int batch_index, int threads) {
  const CounterRandom prototypes(seed, prototype_stream);
  // Streams are distinct per (rank, batch): ranks never see each other's samples.
  const CounterRandom samples(
      seed, sample_stream_base + (std::uint64_t(rank) << 24) + std::uint64_t(batch_index));
  HostBatch data;
  data.labels.resize(batch);
  data.inputs.resize(std::size_t(batch) * input_size);
  // About 60 ns a value on one core, two Box-Muller normals each: an image model's eight batches
  // before training took seconds of every point's set-up (vgg-16 at batch 64, 77 million values).
  // Each sample is a pure function of its index, so `threads` share them, and every value is the
  // same whatever their number.
  const int team = std::clamp(threads, 1, std::max(batch, 1));
#pragma omp parallel for num_threads(team) schedule(static) if (team > 1)
  for (int b = 0; b < batch; ++b) {
    // Index 0 of each sample's stride picks the label; the rest make the noise.
    const std::uint64_t sample_base = std::uint64_t(b) * (std::uint64_t(input_size) + 1);
    const int label = int(samples.uniform(sample_base) * classes);
    data.labels[b] = label;
    for (int i = 0; i < input_size; ++i)
      data.inputs[std::size_t(b) * input_size + i] =
          float(prototypes.normal(std::uint64_t(label) * input_size + i) +
                noise_stddev * samples.normal(sample_base + 1 + i));
  }
  return data;
}

double prototype_best_accuracy(int input_size) {
  return input_size >= 64 ? 1.0 : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace dlscale::workloads
