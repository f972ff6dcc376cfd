// dlscale-bench-noise-scale: what measuring the gradient noise scale costs a training step. On two
// or more ranks every step reads two squared norms: each rank's own gradient, a pass over the
// gradients before their sums, and the mean gradient's, inside the SGD update's own pass. One
// process, each model at its reference CPU batch (or --batch), interleaved rounds of
//   step       one whole training step (forward, backward, update), as dlscale times it
//   norm       squared_norm over every gradient (the extra pass)
//   update     the SGD update without the norm, and with it
// and reports cost_% = (norm + update_with - update_without) / step * 100, medians over rounds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "analysis/statistics.hpp"
#include "cli/count_list.hpp"
#include "comm/mpi_gradient_communicator.hpp"
#include "comm/mpi_session.hpp"
#include "core/build_info.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "kernels/device_array.hpp"
#include "model/sgd_momentum.hpp"
#include "worker/device_dataset.hpp"
#include "worker/training_loop.hpp"
#include "workloads/workload_registry.hpp"

namespace {

using namespace dlscale;
namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t seed = 42;

template <typename Call>
double timed(Call&& call) {
  const auto begin = Clock::now();
  call();
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string models = "fcn-r,fcn-s,alexnet-r,resnet-56,lstm-32";
  int threads = 1, rounds = 10, batch = 0;
  po::options_description description(
      "dlscale-bench-noise-scale: the gradient noise scale's cost per training step");
  description.add_options()("help,h", "this help")(
      "models,m", po::value(&models)->default_value(models), "comma-separated models")(
      "batch,b", po::value(&batch)->default_value(batch),
      "samples per step (0: each model's reference CPU batch)")(
      "threads,t", po::value(&threads)->default_value(threads), "compute threads")(
      "rounds,r", po::value(&rounds)->default_value(rounds), "interleaved rounds per model");
  po::variables_map values;
  po::store(po::parse_command_line(argc, argv, description), values);
  po::notify(values);
  if (values.count("help")) {
    std::cout << description << "\n";
    return 0;
  }
  comm::MpiSession mpi(argc, argv);
  kernels::CpuDevice device(threads);
  comm::MpiGradientCommunicator alone(MPI_COMM_SELF, device, comm::BackgroundSums::blocking_calls);
  fmt::print("dlscale-bench-noise-scale, commit {}, {}, {} thread(s), {} rounds\n\n",
             build_info::git_commit, device.description(), threads, rounds);
  fmt::print(
      "| model | batch | parameters | step ms | norm ms | update ms (without, with) | "
      "cost % of step |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string_view name : cli::split_list(models)) {
    const auto workload = workloads::make_workload(std::string(name));
    const int samples = batch > 0 ? batch : workload->default_batch();
    const worker::DeviceDataset data(device, *workload, samples, 2, seed, 0);
    auto network = workload->build_network(device, samples);
    network->initialize(seed);
    model::SgdMomentum<float> optimizer(device, network->parameters().size(), 0.001f, 0.9f);
    kernels::DeviceArray<double> norm(device, 1);
    auto& math = device.math<float>();
    const auto gradients = network->gradients();
    std::vector<double> step, pass, without, with;
    for (int round = 0; round < rounds; ++round) {
      const auto measured = worker::train(*network, optimizer, data, alone,
                                          worker::make_gradient_exchange(*network, 0, false),
                                          device, worker::TrainingSchedule{1, 1});
      step.push_back(measured.phase_seconds[phase_count + index_of(Phase::step)]);
      pass.push_back(
          timed([&] { math.squared_norm(gradients.size(), gradients.data(), norm.data()); }));
      without.push_back(timed(
          [&] { optimizer.step(network->parameters(), network->gradients(), 1.0f, nullptr); }));
      with.push_back(timed(
          [&] { optimizer.step(network->parameters(), network->gradients(), 1.0f, norm.data()); }));
    }
    const double cost = analysis::median(pass) + analysis::median(with) - analysis::median(without);
    fmt::print("| {} | {} | {} | {:.2f} | {:.3f} | {:.3f}, {:.3f} | {:.2f} |\n", workload->name(),
               samples, network->parameters().size(), analysis::median(step) * 1e3,
               analysis::median(pass) * 1e3, analysis::median(without) * 1e3,
               analysis::median(with) * 1e3, cost / analysis::median(step) * 100);
    std::fflush(stdout);
  }
  return 0;
}
