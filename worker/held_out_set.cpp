#include "worker/held_out_set.hpp"

#include <algorithm>

#include "comm/mpi_check.hpp"

namespace dlscale::worker {

namespace {

std::vector<workloads::HostBatch> validation_share(const workloads::Workload& workload, int batch,
                                                   int samples, std::uint64_t seed, int rank,
                                                   int ranks) {
  const int batches = (samples + batch - 1) / batch;
  std::vector<workloads::HostBatch> share;
  for (int index = rank; index < batches; index += ranks)
    share.push_back(workload.make_validation_batch(batch, seed, index));
  return share;
}

}  // namespace

HeldOutSet::HeldOutSet(kernels::Device& device, const workloads::Workload& workload, int batch,
                       int samples, std::uint64_t seed, int rank, int ranks)
    : host_(validation_share(workload, batch, samples, seed, rank, ranks)),
      data_(device, batch, host_) {}

results::Evaluation HeldOutSet::evaluate(model::Network<float>& network, MPI_Comm group) const {
  // [0] predictions scored, [1] right ones, [2] their summed loss: summed over the ranks.
  double totals[3] = {0, 0, 0};
  const int classes = network.classes();
  for (std::size_t b = 0; b < host_.size(); ++b) {
    const int index = int(b);
    network.forward_loss(data_.batch(), data_.inputs(index), data_.labels(index));
    const auto& labels = host_[b].labels;
    totals[2] += network.loss() * double(labels.size());  // loss() is the mean over them
    const std::vector<float> logits = network.logits().to_host();
    for (std::size_t p = 0; p < labels.size(); ++p) {
      const float* row = logits.data() + p * classes;
      totals[1] += double(std::max_element(row, row + classes) - row == labels[p]);
    }
    totals[0] += double(labels.size());
  }
  DLSCALE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, totals, 3, MPI_DOUBLE, MPI_SUM, group));
  results::Evaluation evaluation;
  evaluation.accuracy = totals[1] / totals[0];
  evaluation.loss = totals[2] / totals[0];
  return evaluation;
}

}  // namespace dlscale::worker
