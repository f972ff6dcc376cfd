// dlscale-bench-step: how close a whole training step of fcn-r and fcn-s comes to one large sgemm
// on the same machine, both measured in the same run, at each thread count (docs/performance.md).
//   sgemm_gflops = 2*m*n*k / sgemm_seconds;   step_gflops = training_flops_per_sample * batch /
//   median step_seconds ratio = step_gflops / sgemm_gflops;       timer_overhead_% = 5 clock reads
//   * lap_seconds / median step_seconds * 100
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "analysis/statistics.hpp"
#include "cli/count_list.hpp"
#include "comm/mpi_gradient_communicator.hpp"
#include "comm/mpi_session.hpp"
#include "core/build_info.hpp"
#include "core/errors.hpp"
#include "core/phases.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "kernels/device_array.hpp"
#include "kernels/device_factory.hpp"
#include "model/sgd_momentum.hpp"
#include "worker/device_dataset.hpp"
#include "worker/training_loop.hpp"
#include "workloads/workload_registry.hpp"

namespace {

using namespace dlscale;
namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;
using analysis::median;
using kernels::Transpose;

constexpr float learning_rate = 0.01f;  // dlscale run's defaults
constexpr float sgd_momentum = 0.9f;
constexpr std::uint64_t seed = 42;
constexpr int distinct_batches = 4;
// Device events per step: one at the start and one after each of the four phases.
constexpr int clock_reads_per_step = 5;
constexpr std::array<Phase, 4> step_phases = {Phase::forward, Phase::backward, Phase::allreduce,
                                              Phase::update};

// One model at one batch (by default its reference CPU batch: fcn-r 1024, fcn-s 64, ...).
struct WorkloadCase {
  std::string model;
  int batch;
};

struct Options {
  std::vector<int> threads{1, 2};
  std::vector<WorkloadCase> cases;
  int measured_iterations = 8;
  int warmup_iterations = 2;
  int profile_iterations = 2;
  int sgemm_size = 4096;
  int sgemm_repeats = 3;
  long timer_calls = 1000000;
  kernels::Precision precision = kernels::Precision::fp32;
};

// "fcn-r,gpt:2,64,4,32,128,fcn-s" -> fcn-r, gpt:2,64,4,32,128, fcn-s: a spec's own fields are
// digits, and no model's name is.
std::vector<std::string> split_model_list(const std::string& models) {
  std::vector<std::string> list;
  for (std::size_t start = 0; start <= models.size();) {
    const std::size_t comma = std::min(models.find(',', start), models.size());
    std::string field = models.substr(start, comma - start);
    const bool digits =
        !field.empty() && field.find_first_not_of("0123456789") == std::string::npos;
    if (digits && !list.empty() && list.back().find(':') != std::string::npos)
      list.back() += "," + field;
    else
      list.push_back(std::move(field));
    start = comma + 1;
  }
  return list;
}

double seconds_since(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  std::string threads = "1,2";
  std::string models = "fcn-r,fcn-s";
  int batch = 0;
  std::string precision = kernels::precision_name(options.precision);
  po::options_description description(
      "dlscale-bench-step: training-step GFLOP/s of each model at its reference CPU batch\n"
      "beside one large sgemm, measured in the same run. Run it without mpirun.\nOptions");
  // clang-format off
  description.add_options()("help,h", "show this help")(
      "threads,t", po::value(&threads)->default_value(threads),
      "comma-separated compute thread counts (OpenBLAS and OpenMP)")(
      "models,m", po::value(&models)->default_value(models),
      "comma-separated models: built-in names (dlscale --list-models) or specs such as "
      "gpt:12,768,12,256,50257 (a field of digits continues the spec before it)")(
      "batch,b", po::value(&batch)->default_value(batch),
      "samples per step of every model (0: each model's reference CPU batch)")(
      "iters,n",
      po::value(&options.measured_iterations)->default_value(options.measured_iterations),
      "measured training iterations per case")(
      "warmup,w", po::value(&options.warmup_iterations)->default_value(options.warmup_iterations),
      "warm-up iterations per case, not measured")(
      "profile-iters",
      po::value(&options.profile_iterations)->default_value(options.profile_iterations),
      "iterations of the separate per-kernel profile pass (0: skip it)")(
      "sgemm-size", po::value(&options.sgemm_size)->default_value(options.sgemm_size),
      "m = n = k of the reference sgemm")(
      "sgemm-repeats", po::value(&options.sgemm_repeats)->default_value(options.sgemm_repeats),
      "reference sgemm runs before and again after the workloads, per thread count")(
      "timer-calls", po::value(&options.timer_calls)->default_value(options.timer_calls),
      "phase-boundary event reads averaged for the timer cost")(
      "precision", po::value(&precision)->default_value(precision),
      "float math of GEMMs and convolutions, as dlscale --precision: fp32 or bf16");
  // clang-format on
  po::variables_map values;
  try {
    po::store(po::command_line_parser(argc, argv).options(description).run(), values);
    po::notify(values);
  } catch (const po::error& error) {
    throw UserError(error.what());
  }
  if (values.count("help")) {
    std::ostringstream text;
    text << description;
    fmt::print("{}", text.str());
    return std::nullopt;
  }
  options.threads = cli::parse_count_list(threads, "--threads", 1024, "thread count");
  const auto named = kernels::precision_names.named(precision);
  if (!named || !offers(kernels::device_record(kernels::DeviceKind::cpu), *named))
    throw UserError(
        fmt::format("--precision: the CPU computes in fp32 or bf16, not '{}'", precision));
  options.precision = *named;
  if (batch < 0) throw UserError("--batch must not be negative");
  for (const std::string& model : split_model_list(models)) {
    const auto workload = workloads::make_workload(model);
    options.cases.push_back({workload->name(), batch ? batch : workload->default_batch()});
  }
  if (options.measured_iterations < 1) throw UserError("--iters must be at least 1");
  if (options.warmup_iterations < 0) throw UserError("--warmup must not be negative");
  if (options.profile_iterations < 0) throw UserError("--profile-iters must not be negative");
  if (options.sgemm_size < 64 || options.sgemm_size > 16384)
    throw UserError("--sgemm-size must be in 64..16384");
  if (options.sgemm_repeats < 1) throw UserError("--sgemm-repeats must be at least 1");
  if (options.timer_calls < 1) throw UserError("--timer-calls must be at least 1");
  return options;
}

// GFLOP/s of `repeats` square sgemms (row-major, no transpose) through the device's own gemm.
std::vector<double> sgemm_gflops_runs(kernels::Device& device, int size, int repeats) {
  const std::size_t count = std::size_t(size) * size;
  std::vector<float> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = float(int(i % 17) - 8) / 8.0f;
  kernels::DeviceArray<float> a(device, count), b(device, count), c(device, count);
  a.copy_from_host(host);
  b.copy_from_host(host);
  c.copy_from_host(host);
  auto& math = device.math_float();
  const auto multiply = [&](int n) {
    math.gemm(Transpose::no, Transpose::no, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
              n);
    device.synchronize();
  };
  multiply(size);  // starts the BLAS threads and picks the GEMM library for the shape; not timed
  std::vector<double> gflops;
  for (int r = 0; r < repeats; ++r) {
    const auto begin = Clock::now();
    multiply(size);
    gflops.push_back(2.0 * size * size * double(size) / seconds_since(begin) / 1e9);
  }
  return gflops;
}

// Mean seconds of one phase boundary: a device event recorded, then read against the last one.
double lap_seconds(kernels::Device& device, long calls) {
  const auto previous = device.make_event(), now = device.make_event();
  device.record(*previous);
  volatile double sink = 0;
  const auto begin = Clock::now();
  for (long i = 0; i < calls; ++i) {
    device.record(*now);
    sink = sink + device.elapsed_seconds(*previous, *now);
  }
  return seconds_since(begin) / double(calls);
}

// ---- Per-kernel profile: a Device that forwards to the real one and times every math call. ----

struct KernelRecord {
  double seconds = 0;
  long calls = 0;
  double flops = 0;  // GEMMs only
};
using KernelProfile = std::map<std::string, KernelRecord>;

class ProfiledMath final : public kernels::MathOps<float> {
 public:
  ProfiledMath(kernels::Device& device, KernelProfile& profile)
      : device_(device), math_(device.math_float()), profile_(profile) {}

  void gemm(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
            const float* a, int lda, const float* b, int ldb, float beta, float* c,
            int ldc) override {
    const auto letter = [](Transpose t) { return t == Transpose::yes ? 'T' : 'N'; };
    timed(
        fmt::format("sgemm {}{} m={} n={} k={}", letter(transpose_a), letter(transpose_b), m, n, k),
        2.0 * m * n * double(k), [&] {
          math_.gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        });
  }
  void gemm_strided_batched(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                            float alpha, const float* a, int lda, std::ptrdiff_t stride_a,
                            const float* b, int ldb, std::ptrdiff_t stride_b, float beta, float* c,
                            int ldc, std::ptrdiff_t stride_c, int count) override {
    const auto letter = [](Transpose t) { return t == Transpose::yes ? 'T' : 'N'; };
    timed(fmt::format("sgemm {}{} m={} n={} k={} x{}", letter(transpose_a), letter(transpose_b), m,
                      n, k, count),
          2.0 * m * n * double(k) * count, [&] {
            math_.gemm_strided_batched(transpose_a, transpose_b, m, n, k, alpha, a, lda, stride_a,
                                       b, ldb, stride_b, beta, c, ldc, stride_c, count);
          });
  }
  void add_row_bias(int rows, int cols, const float* bias, float* y) override {
    timed("add_row_bias", 0, [&] { math_.add_row_bias(rows, cols, bias, y); });
  }
  void column_sums(int rows, int cols, const float* dy, float* sums) override {
    timed("column_sums", 0, [&] { math_.column_sums(rows, cols, dy, sums); });
  }
  void relu_forward(std::size_t count, float ceiling, const float* x, float* y) override {
    timed("relu_forward", 0, [&] { math_.relu_forward(count, ceiling, x, y); });
  }
  void relu_backward(std::size_t count, float ceiling, const float* y, const float* dy,
                     float* dx) override {
    timed("relu_backward", 0, [&] { math_.relu_backward(count, ceiling, y, dy, dx); });
  }
  void add(std::size_t count, const float* a, const float* b, float* y) override {
    timed("add", 0, [&] { math_.add(count, a, b, y); });
  }
  void sigmoid_forward(std::size_t count, const float* x, float* y) override {
    timed("sigmoid_forward", 0, [&] { math_.sigmoid_forward(count, x, y); });
  }
  void sigmoid_backward(std::size_t count, const float* y, const float* dy, float* dx) override {
    timed("sigmoid_backward", 0, [&] { math_.sigmoid_backward(count, y, dy, dx); });
  }
  void embedding_forward(int rows, int width, const float* ids, const float* table,
                         float* y) override {
    timed("embedding_forward", 0, [&] { math_.embedding_forward(rows, width, ids, table, y); });
  }
  void embedding_backward(int rows, int width, int vocabulary, const float* ids, const float* dy,
                          float* table_gradient, bool add_to_gradient) override {
    timed("embedding_backward", 0, [&] {
      math_.embedding_backward(rows, width, vocabulary, ids, dy, table_gradient, add_to_gradient);
    });
  }
  void layer_norm_forward(int rows, int width, const float* x, const float* scale_shift, float* y,
                          float* mean, float* variance) override {
    timed("layer_norm_forward", 0,
          [&] { math_.layer_norm_forward(rows, width, x, scale_shift, y, mean, variance); });
  }
  void layer_norm_backward(int rows, int width, const float* x, const float* scale_shift,
                           const float* mean, const float* variance, const float* dy, float* dx,
                           float* scale_shift_gradient) override {
    timed("layer_norm_backward", 0, [&] {
      math_.layer_norm_backward(rows, width, x, scale_shift, mean, variance, dy, dx,
                                scale_shift_gradient);
    });
  }
  void gelu_forward(std::size_t count, const float* x, float* y) override {
    timed("gelu_forward", 0, [&] { math_.gelu_forward(count, x, y); });
  }
  void gelu_backward(std::size_t count, const float* x, const float* dy, float* dx) override {
    timed("gelu_backward", 0, [&] { math_.gelu_backward(count, x, dy, dx); });
  }
  void causal_softmax_forward(int heads, int rows, float* scores) override {
    timed("causal_softmax_forward", 0, [&] { math_.causal_softmax_forward(heads, rows, scores); });
  }
  void causal_softmax_backward(int heads, int rows, const float* probabilities,
                               float* gradient) override {
    timed("causal_softmax_backward", 0,
          [&] { math_.causal_softmax_backward(heads, rows, probabilities, gradient); });
  }
  void softmax_cross_entropy(int rows, int classes, const float* logits, const std::int32_t* labels,
                             float* dlogits, float* loss) override {
    timed("softmax_cross_entropy", 0,
          [&] { math_.softmax_cross_entropy(rows, classes, logits, labels, dlogits, loss); });
  }
  void sgd_momentum_update(std::size_t count, float learning_rate, float momentum,
                           float gradient_scale, const float* gradient, float* velocity,
                           float* parameters, std::int32_t* nonfinite_gradient,
                           double* squared_norm) override {
    timed("sgd_momentum_update", 0, [&] {
      math_.sgd_momentum_update(count, learning_rate, momentum, gradient_scale, gradient, velocity,
                                parameters, nonfinite_gradient, squared_norm);
    });
  }
  void adamw_update(std::size_t count, float learning_rate,
                    const kernels::AdamWHyperparameters<float>& hyperparameters,
                    float gradient_scale, const float* gradient, float* first_moment,
                    float* second_moment, float* parameters, std::int64_t* step_count,
                    std::int32_t* nonfinite_gradient, double* squared_norm) override {
    timed("adamw_update", 0, [&] {
      math_.adamw_update(count, learning_rate, hyperparameters, gradient_scale, gradient,
                         first_moment, second_moment, parameters, step_count, nonfinite_gradient,
                         squared_norm);
    });
  }
  void squared_norm(std::size_t count, const float* x, double* squared_norm) override {
    timed("squared_norm", 0, [&] { math_.squared_norm(count, x, squared_norm); });
  }

 private:
  template <typename Call>
  void timed(const std::string& kernel, double flops, Call&& call) {
    const auto begin = Clock::now();
    call();
    device_.synchronize();
    KernelRecord& record = profile_[kernel];
    record.seconds += seconds_since(begin);
    record.calls += 1;
    record.flops += flops;
  }

  kernels::Device& device_;
  kernels::MathOps<float>& math_;
  KernelProfile& profile_;
};

class ProfiledDevice final : public kernels::Device {
 public:
  ProfiledDevice(kernels::Device& device, KernelProfile& profile)
      : device_(device), math_(device, profile) {}

  std::string description() const override { return device_.description(); }
  kernels::DeviceProperties properties() const override { return device_.properties(); }
  int compute_threads() const override { return device_.compute_threads(); }
  std::size_t free_memory_bytes() const override { return device_.free_memory_bytes(); }
  bool memory_is_host() const override { return device_.memory_is_host(); }
  void* allocate(std::size_t bytes) override { return device_.allocate(bytes); }
  void deallocate(void* pointer) noexcept override { device_.deallocate(pointer); }
  void copy_to_device(void* destination, const void* source, std::size_t bytes) override {
    device_.copy_to_device(destination, source, bytes);
  }
  void copy_to_host(void* destination, const void* source, std::size_t bytes) override {
    device_.copy_to_host(destination, source, bytes);
  }
  void copy_on_device(void* destination, const void* source, std::size_t bytes) override {
    device_.copy_on_device(destination, source, bytes);
  }
  void synchronize() override { device_.synchronize(); }
  std::unique_ptr<kernels::DeviceEvent> make_event() override { return device_.make_event(); }
  void record(kernels::DeviceEvent& event) override { device_.record(event); }
  double elapsed_seconds(const kernels::DeviceEvent& from,
                         const kernels::DeviceEvent& to) override {
    return device_.elapsed_seconds(from, to);
  }
  void wait(const kernels::DeviceEvent& event) override { device_.wait(event); }
  // Profiling times every call from the host, so nothing is captured.
  std::unique_ptr<kernels::CapturedWork> capture(const std::function<void()>&) override {
    return nullptr;
  }
  // Image kernels are not profiled: the benchmark's workloads are fully connected.
  std::unique_ptr<kernels::ConvolutionKernel> make_convolution(
      const kernels::ConvolutionGeometry& geometry) override {
    return device_.make_convolution(geometry);
  }
  std::unique_ptr<kernels::PoolingKernel> make_pooling(
      const kernels::PoolingGeometry& geometry) override {
    return device_.make_pooling(geometry);
  }
  std::unique_ptr<kernels::BatchNormKernel> make_batch_norm(
      const kernels::BatchNormGeometry& geometry) override {
    return device_.make_batch_norm(geometry);
  }
  std::unique_ptr<kernels::LstmKernel> make_lstm(const kernels::LstmGeometry& geometry) override {
    return device_.make_lstm(geometry);
  }
  kernels::MathOps<float>& math_float() override { return math_; }
  kernels::MathOps<double>& math_double() override { return device_.math_double(); }

 private:
  kernels::Device& device_;
  ProfiledMath math_;
};

// ---- Measurement ----

struct CaseResult {
  std::string model;
  int batch = 0;
  int threads = 0;
  double counted_flops_per_step = 0;      // training_flops_per_sample * batch (3x forward)
  double forward_flops_per_step = 0;      // GEMM FLOPs of the forward pass
  double executed_flops_per_step = 0;     // counted minus the first layer's input gradient
  double step_seconds = 0;                // median over measured iterations
  std::array<double, 4> phase_seconds{};  // median of each phase, in step_phases order
  double first_loss = 0, last_loss = 0;
  KernelProfile profile;            // summed over the profile pass
  double profile_step_seconds = 0;  // mean step of the profile pass
  int profile_iterations = 0;
};

struct ThreadResult {
  int threads = 0;
  std::vector<double> sgemm_before, sgemm_after;  // GFLOP/s of each run
  double lap_seconds = 0;
  std::vector<CaseResult> cases;
  double sgemm_gflops() const {
    std::vector<double> all = sgemm_before;
    all.insert(all.end(), sgemm_after.begin(), sgemm_after.end());
    return median(all);
  }
};

CaseResult run_case(const WorkloadCase& spec, kernels::Device& device,
                    comm::GradientCommunicator& communicator, const Options& options) {
  const auto workload = workloads::make_workload(spec.model);
  CaseResult result;
  result.model = workload->name();
  result.batch = spec.batch;
  result.threads = device.compute_threads();
  result.counted_flops_per_step = workload->training_flops_per_sample() * spec.batch;
  const worker::DeviceDataset data(device, *workload, spec.batch, distinct_batches, seed,
                                   communicator.rank());
  {
    auto network = workload->build_network(device, spec.batch);
    network->initialize(seed);
    double forward = 0;
    for (const auto& layer : network->layers()) forward += layer->forward_flops_per_sample();
    // Network::backward passes no input-gradient buffer to the first layer: that GEMM, as many
    // FLOPs as the first layer's forward, is counted by the 3x convention but never run.
    const double first_layer_input_gradient = network->layers().front()->forward_flops_per_sample();
    result.forward_flops_per_step = forward * spec.batch;
    result.executed_flops_per_step = (3 * forward - first_layer_input_gradient) * spec.batch;

    model::SgdMomentum<float> optimizer(device, network->parameters().size(), learning_rate,
                                        sgd_momentum);
    const worker::TrainingSchedule schedule{options.warmup_iterations, options.measured_iterations};
    // The instruments a training point runs with (the noise scale's norms on two or more ranks),
    // so that the step timed here is the step dlscale times.
    const auto instruments = worker::make_step_instruments(
        {device, communicator, schedule.warmup_iterations, 0, worker::Evaluator{}});
    const auto measured = worker::train(*network, optimizer, data, communicator,
                                        worker::make_gradient_exchange(*network, 0, false), device,
                                        schedule, {}, {}, instruments);
    std::vector<double> steps;
    std::array<std::vector<double>, 4> phases;
    for (int i = options.warmup_iterations; i < schedule.total_iterations(); ++i) {
      const double* seconds = measured.phase_seconds.data() + std::size_t(i) * phase_count;
      steps.push_back(seconds[index_of(Phase::step)]);
      for (std::size_t p = 0; p < step_phases.size(); ++p)
        phases[p].push_back(seconds[index_of(step_phases[p])]);
    }
    result.step_seconds = median(steps);
    for (std::size_t p = 0; p < step_phases.size(); ++p)
      result.phase_seconds[p] = median(phases[p]);
    result.first_loss = measured.loss.front();
    result.last_loss = measured.loss.back();
  }
  if (options.profile_iterations > 0) {
    // A separate pass (its network freed above first): every kernel call timed on its own.
    ProfiledDevice profiled(device, result.profile);
    auto network = workload->build_network(profiled, spec.batch);
    network->initialize(seed);
    model::SgdMomentum<float> optimizer(profiled, network->parameters().size(), learning_rate,
                                        sgd_momentum);
    const int warmup = 1;
    const worker::TrainingSchedule schedule{warmup, options.profile_iterations};
    const auto measured = worker::train(
        *network, optimizer, data, communicator, worker::make_gradient_exchange(*network, 0, false),
        profiled, schedule, {}, [&](const worker::IterationReport& report) {
          if (report.iteration == warmup - 1) result.profile.clear();
          return true;
        });
    double total = 0;
    for (int i = warmup; i < schedule.total_iterations(); ++i)
      total += measured.phase_seconds[std::size_t(i) * phase_count + index_of(Phase::step)];
    result.profile_iterations = options.profile_iterations;
    result.profile_step_seconds = total / options.profile_iterations;
  }
  return result;
}

// ---- Report ----

std::string percent(double fraction, int decimals = 1) {
  return fmt::format("{:.{}f}%", 100 * fraction, decimals);
}

void print_report(const std::vector<ThreadResult>& results, const Options& options,
                  const std::string& command_line, const std::string& cpu_model) {
  fmt::print("# dlscale-bench-step: training step vs sgemm\n\n");
  fmt::print("- command: `{}`\n", command_line);
  fmt::print("- dlscale {} (git {}); CPU: {}; BLAS: {}\n", build_info::version,
             build_info::git_commit, cpu_model, kernels::cpu_blas_description());
  fmt::print("- MPI: {}, 1 rank (singleton)\n", comm::mpi_library_version());
  fmt::print(
      "- sgemm: {0}x{0}x{0} float through the CPU device's gemm, {1} runs before and {1} after the "
      "workloads at each thread count; the sgemm column is the median of those {2} runs\n",
      options.sgemm_size, options.sgemm_repeats, 2 * options.sgemm_repeats);
  fmt::print(
      "- step: real training loop (forward+loss, backward, MPI allreduce, SGD momentum), "
      "median of {} measured iterations after {} warm-up\n",
      options.measured_iterations, options.warmup_iterations);
  fmt::print(
      "- step GFLOP/s = training_flops_per_sample * batch / median step s (3x forward, "
      "docs/workloads.md); ratio = step GFLOP/s / sgemm GFLOP/s\n");
  fmt::print(
      "- timer overhead = {} clock reads per step x {:.1f} ns per phase-boundary event "
      "(mean of {} calls) / median step\n\n",
      clock_reads_per_step, 1e9 * results.front().lap_seconds, options.timer_calls);

  fmt::print(
      "| workload | batch | threads | median step s | step GFLOP/s | sgemm GFLOP/s | ratio | timer "
      "overhead % |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& thread_result : results)
    for (const auto& c : thread_result.cases) {
      const double step_gflops = c.counted_flops_per_step / c.step_seconds / 1e9;
      const double sgemm = thread_result.sgemm_gflops();
      fmt::print("| {} | {} | {} | {:.4f} | {:.1f} | {:.1f} | {} | {:.2g} |\n", c.model, c.batch,
                 c.threads, c.step_seconds, step_gflops, sgemm, percent(step_gflops / sgemm),
                 100 * clock_reads_per_step * thread_result.lap_seconds / c.step_seconds);
    }

  fmt::print("\n## Phase split (median seconds of each phase, share of the median step)\n\n");
  fmt::print(
      "| workload | threads | forward s | backward s | allreduce s | update s | forward GEMM "
      "GFLOP/s | backward GEMM GFLOP/s | loss first -> last |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (const auto& thread_result : results)
    for (const auto& c : thread_result.cases) {
      std::string cells;
      for (double seconds : c.phase_seconds)
        cells += fmt::format(" {:.3g} ({}) |", seconds, percent(seconds / c.step_seconds, 0));
      const double backward_flops = c.executed_flops_per_step - c.forward_flops_per_step;
      fmt::print("| {} | {} |{} {:.1f} | {:.1f} | {:.3f} -> {:.3f} |\n", c.model, c.threads, cells,
                 c.forward_flops_per_step / c.phase_seconds[0] / 1e9,
                 backward_flops / c.phase_seconds[1] / 1e9, c.first_loss, c.last_loss);
    }
  fmt::print(
      "\nPhase GFLOP/s divide the GEMM FLOPs the phase executes by the whole phase time "
      "(element-wise kernels included).\n");

  fmt::print("\n## FLOP convention\n\n");
  fmt::print(
      "| workload | batch | counted GFLOP/step (3x forward) | executed GEMM GFLOP/step | counted / "
      "executed |\n");
  fmt::print("|---|---:|---:|---:|---:|\n");
  for (const auto& c : results.front().cases)
    fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.3f} |\n", c.model, c.batch,
               c.counted_flops_per_step / 1e9, c.executed_flops_per_step / 1e9,
               c.counted_flops_per_step / c.executed_flops_per_step);

  fmt::print("\n## sgemm drift (GFLOP/s: median [min, max])\n\n");
  fmt::print("| threads | before the workloads | after the workloads | after / before |\n");
  fmt::print("|---:|---:|---:|---:|\n");
  for (const auto& r : results) {
    const auto cell = [](const std::vector<double>& runs) {
      return fmt::format("{:.1f} [{:.1f}, {:.1f}]", median(runs),
                         *std::min_element(runs.begin(), runs.end()),
                         *std::max_element(runs.begin(), runs.end()));
    };
    fmt::print("| {} | {} | {} | {:.3f} |\n", r.threads, cell(r.sgemm_before), cell(r.sgemm_after),
               median(r.sgemm_after) / median(r.sgemm_before));
  }

  if (options.profile_iterations == 0) return;
  fmt::print(
      "\n## Kernel profile (separate pass, {} iterations after 1 warm-up, every math call "
      "timed; per step)\n",
      options.profile_iterations);
  for (const auto& r : results)
    for (const auto& c : r.cases) {
      fmt::print("\n### {} batch {}, {} thread(s): profiled step {:.4f} s\n\n", c.model, c.batch,
                 c.threads, c.profile_step_seconds);
      fmt::print("| kernel | calls/step | ms/step | share of step | GFLOP/s |\n");
      fmt::print("|---|---:|---:|---:|---:|\n");
      std::vector<std::pair<std::string, KernelRecord>> rows(c.profile.begin(), c.profile.end());
      std::sort(rows.begin(), rows.end(),
                [](const auto& x, const auto& y) { return x.second.seconds > y.second.seconds; });
      double gemm_seconds = 0, other_seconds = 0, gemm_flops = 0;
      for (const auto& [kernel, record] : rows) {
        const double per_step = record.seconds / c.profile_iterations;
        (record.flops > 0 ? gemm_seconds : other_seconds) += per_step;
        gemm_flops += record.flops / c.profile_iterations;
        fmt::print("| {} | {} | {:.2f} | {} | {} |\n", kernel, record.calls / c.profile_iterations,
                   1e3 * per_step, percent(per_step / c.profile_step_seconds),
                   record.flops > 0 ? fmt::format("{:.1f}", record.flops / record.seconds / 1e9)
                                    : std::string("-"));
      }
      const double rest = c.profile_step_seconds - gemm_seconds - other_seconds;
      fmt::print("| **all sgemm** | | {:.2f} | {} | {:.1f} |\n", 1e3 * gemm_seconds,
                 percent(gemm_seconds / c.profile_step_seconds), gemm_flops / gemm_seconds / 1e9);
      fmt::print("| **all element-wise** | | {:.2f} | {} | - |\n", 1e3 * other_seconds,
                 percent(other_seconds / c.profile_step_seconds));
      fmt::print("| **rest (allreduce, loop)** | | {:.2f} | {} | - |\n", 1e3 * rest,
                 percent(rest / c.profile_step_seconds));
    }
}

int run(const Options& options, const comm::MpiSession& mpi, const std::string& command_line) {
  if (mpi.world_size() != 1)
    throw UserError("run dlscale-bench-step as one process, without mpirun (an MPI singleton)");
  std::vector<ThreadResult> results;
  std::string cpu_model;
  for (int threads : options.threads) {
    auto device =
        kernels::device_record(kernels::DeviceKind::cpu).make({threads, options.precision});
    comm::MpiGradientCommunicator communicator(mpi.world(), *device);
    cpu_model = device->description();
    ThreadResult result;
    result.threads = threads;
    fmt::print(stderr, "threads {}: sgemm {}^3 x {}\n", threads, options.sgemm_size,
               options.sgemm_repeats);
    result.sgemm_before = sgemm_gflops_runs(*device, options.sgemm_size, options.sgemm_repeats);
    result.lap_seconds = lap_seconds(*device, options.timer_calls);
    for (const auto& spec : options.cases) {
      fmt::print(stderr, "threads {}: {} batch {}\n", threads, spec.model, spec.batch);
      result.cases.push_back(run_case(spec, *device, communicator, options));
    }
    fmt::print(stderr, "threads {}: sgemm again\n", threads);
    result.sgemm_after = sgemm_gflops_runs(*device, options.sgemm_size, options.sgemm_repeats);
    results.push_back(std::move(result));
  }
  print_report(results, options, command_line, cpu_model);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string command_line = "dlscale-bench-step";
  for (int i = 1; i < argc; ++i) command_line += fmt::format(" {}", argv[i]);
  dlscale::comm::MpiSession mpi(argc, argv);
  try {
    const auto options = parse_options(argc, argv);
    if (!options) return 0;
    return run(*options, mpi, command_line);
  } catch (const dlscale::UserError& error) {
    fmt::print(stderr, "dlscale-bench-step: {}\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "dlscale-bench-step: error: {}\n", error.what());
    return 1;
  }
}
