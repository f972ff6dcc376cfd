// A step instrument's hooks fire at the loop's seams: start once; in the steps it reads, before
// each bucket's sum and at the update; after every step and every iteration; stop once, with the
// iterations that ran. What it adds at the stop reaches the rank's measurements.
#include <gtest/gtest.h>

#include <mpi.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_gradient_communicator.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "kernels/device_array.hpp"
#include "model/sgd_momentum.hpp"
#include "worker/training_loop.hpp"
#include "workloads/fcn_workload.hpp"

namespace dlscale::worker {
namespace {

constexpr std::uint64_t seed = 5;
constexpr int batch = 4;
const TrainingSchedule schedule{2, 6};
// The layers hold 130, 88 and 36 parameters: 4-byte buckets make one per layer.
constexpr std::size_t bucket_bytes = 4;
constexpr std::size_t layers = 3;

// Reads at every third iteration from the second on, and writes down every hook it is given.
class RecordingInstrument : public StepInstrument {
 public:
  explicit RecordingInstrument(kernels::Device& device) : update_norm_(device, 1) {}

  static bool reads(int iteration) { return iteration % 3 == 1; }

  void start(std::size_t summed_buckets) override {
    calls.push_back(fmt::format("start {}", summed_buckets));
  }
  bool reads_at(int iteration) const override { return reads(iteration); }
  const kernels::DeviceEvent* before_bucket_sum(std::size_t bucket,
                                                std::span<const float> gradients) override {
    calls.push_back(fmt::format("bucket {} of {} values", bucket, gradients.size()));
    return nullptr;
  }
  double* update_squared_norm_out() override {
    calls.push_back("update");
    update_norm_.copy_from_host(std::vector<double>{-1.0});
    return update_norm_.data();
  }
  void after_step(const StepEnd& step) override {
    calls.push_back(fmt::format("step {}{}", step.iteration, step.instrument_read ? " read" : ""));
    if (step.instrument_read) update_norms.push_back(update_norm_.to_host().front());
  }
  bool after_iteration(const TrainingProgress& progress, IterationReport& report) override {
    calls.push_back(fmt::format("iteration {} of report {}", progress.iteration, report.iteration));
    return false;
  }
  void stop(int completed, RankMeasurements& measured) override {
    calls.push_back(fmt::format("stop after {}", completed));
    results::Measurement marker;
    marker.name = "recording_instrument_stopped";
    measured.series.push_back(marker);
  }

  std::vector<std::string> calls;
  std::vector<double> update_norms;  // what the update wrote, in each step read

 private:
  kernels::DeviceArray<double> update_norm_;
};

struct Trained {
  RankMeasurements measured;
  std::vector<std::string> calls;
  std::vector<double> update_norms;
  int ranks = 0;
};

Trained train_recorded(bool overlap, const IterationObserver& observer = {}) {
  const auto workload = workloads::parse_fcn_spec("12,10,8,4");
  kernels::CpuDevice device(1);
  comm::MpiGradientCommunicator communicator(MPI_COMM_WORLD, device);
  const DeviceDataset data(device, *workload, batch, 2, seed, communicator.rank());
  auto network = workload->build_network(device, batch);
  network->initialize(seed);
  model::SgdMomentum<float> optimizer(device, network->parameters().size(), 0.05f, 0.9f);
  std::vector<std::unique_ptr<StepInstrument>> instruments;
  instruments.push_back(std::make_unique<RecordingInstrument>(device));
  const auto& recorder = static_cast<const RecordingInstrument&>(*instruments.front());
  Trained trained;
  trained.measured = train(*network, optimizer, data, communicator,
                           make_gradient_exchange(*network, bucket_bytes, overlap), device,
                           schedule, {}, observer, instruments);
  trained.calls = recorder.calls;
  trained.update_norms = recorder.update_norms;
  trained.ranks = communicator.size();
  return trained;
}

// What the loop must call, given how many buckets it sums (none on one rank).
std::vector<std::string> expected_calls(std::size_t buckets, int iterations) {
  const std::size_t bucket_values[layers] = {36, 88, 130};  // from the last layer down
  std::vector<std::string> calls{fmt::format("start {}", buckets)};
  for (int iteration = 0; iteration < iterations; ++iteration) {
    const bool read = RecordingInstrument::reads(iteration);
    if (read) {
      for (std::size_t b = 0; b < buckets; ++b)
        calls.push_back(fmt::format("bucket {} of {} values", b, bucket_values[b]));
      calls.push_back("update");
    }
    calls.push_back(fmt::format("step {}{}", iteration, read ? " read" : ""));
    calls.push_back(fmt::format("iteration {} of report {}", iteration, iteration));
  }
  calls.push_back(fmt::format("stop after {}", iterations));
  return calls;
}

class StepInstrumentHooks : public ::testing::TestWithParam<bool> {};

TEST_P(StepInstrumentHooks, FireInOrderAndOnlyInTheStepsItReads) {
  const Trained trained = train_recorded(GetParam());
  const std::size_t buckets = trained.ranks > 1 ? layers : 0;
  EXPECT_EQ(trained.calls, expected_calls(buckets, schedule.total_iterations()))
      << "on " << trained.ranks << " rank(s)";
}

TEST_P(StepInstrumentHooks, TheUpdateWritesTheSquaredNormWhereTheInstrumentAsks) {
  const Trained trained = train_recorded(GetParam());
  ASSERT_EQ(trained.update_norms.size(), 3u) << "iterations 1, 4 and 7 read";
  for (const double norm : trained.update_norms) EXPECT_GT(norm, 0) << "the update wrote no norm";
}

TEST_P(StepInstrumentHooks, StopsWithTheIterationsThatRanAndAddsItsSeries) {
  const int last = 3;
  const Trained trained = train_recorded(
      GetParam(), [&](const IterationReport& report) { return report.iteration < last; });
  const std::size_t buckets = trained.ranks > 1 ? layers : 0;
  EXPECT_EQ(trained.calls, expected_calls(buckets, last + 1));
  EXPECT_EQ(trained.measured.loss.size(), std::size_t(last + 1));
  ASSERT_FALSE(trained.measured.series.empty());
  EXPECT_EQ(trained.measured.series.back().name, "recording_instrument_stopped");
}

INSTANTIATE_TEST_SUITE_P(Exchanges, StepInstrumentHooks, ::testing::Bool(), [](const auto& info) {
  return info.param ? "Overlapped" : "AfterBackward";
});

}  // namespace
}  // namespace dlscale::worker
