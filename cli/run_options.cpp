// Boost.Program_options definitions for `dlscale run`; every value is range-checked here.
#include "cli/run_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command_setup.hpp"
#include "cli/count_list.hpp"
#include "comm/communicator_factory.hpp"
#include "core/errors.hpp"
#include "core/named_records.hpp"
#include "kernels/device_factory.hpp"
#include "results/value_bounds.hpp"
#include "worker/node_sharing_probe.hpp"
#include "worker/slurm_allocation.hpp"

namespace dlscale::cli {

namespace po = boost::program_options;

namespace {

// The words two options take instead of numbers.
constexpr std::string_view automatic_stall_timeout = "auto";  // --stall-timeout
constexpr std::string_view every_doubling_of_ranks = "all";   // --ranks: 1, 2, 4, ... and all

// Numbers are read as signed 64-bit so "-3" reaches our range check instead of wrapping.
struct RawNumbers {
  long long batch = 0, iterations = 0, warmup = 0, seed = 0, global_batch = 0, repeats = 1;
  long long evaluate_every = 0, evaluation_samples = 512, max_samples = 262144, lr_warmup = 0,
            lr_batch = 0;
  double target_accuracy = 0, target_loss = 0;
  std::string threads = "1";
  std::string precisions = kernels::precision_name(kernels::Precision::fp32);
  std::string stall_timeout{automatic_stall_timeout};
  std::string probe = yes_no_names(true);
  std::string learning_rate_scaling =
      results::learning_rate_scaling_names(results::LearningRateScaling::none);
  std::string optimizer = results::optimizer_names(results::OptimizerKind::sgd);
  std::string sharding = results::sharding_names(results::Sharding::none);
  std::string sharding_group = results::sharding_group_names(results::ShardingGroup::all);
};

// Boost writes a default through a stream at 17 digits (0.2 reads 0.20000000000000001); this
// gives it the shortest text that reads back as the same number.
po::typed_value<double>* number_with_default(double* target, double value) {
  return po::value(target)->default_value(value, fmt::format("{}", value));
}

// --probe's help, with the bounds the probe keeps.
std::string probe_help() {
  const worker::NodeSharingProbeSchedule schedule;
  return fmt::format(
      "yes: before each point of two or more ranks (and beyond the sweep, see --ranks), time a "
      "few compute-only passes with the point's ranks side by side and with rank 0 alone, for "
      "`dlscale predict`; its passes are at most 1 per {} of the point's iterations, so it takes "
      "at most about 1/{} of the point's training time, and a point of fewer than {} "
      "iterations gets none. no: skip it (predict then holds compute per rank as measured)",
      schedule.iterations_per_pass, schedule.iterations_per_pass,
      worker::least_probed_point_iterations(schedule));
}

constexpr int most_threads = 1024;
constexpr int most_repeats = 100;

po::options_description option_descriptions(RunOptions& options, RawNumbers& raw) {
  const RunOptions defaults;
  po::options_description workload("Workload");
  // clang-format off
  workload.add_options()(
      "model,m", po::value(&options.model)->default_value(defaults.model),
      "built-in model (see --list-models), a fully connected net "
      "fcn:INPUT,HIDDEN,...,CLASSES (e.g. fcn:784,2048,10), an LSTM language model "
      "lstm:SEQ,HIDDEN,LAYERS,VOCAB (e.g. lstm:32,512,2,10000) or a GPT-style transformer "
      "gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY (e.g. gpt:12,768,12,256,50257; a batch is "
      "in sequences)")(
      "batch,b", po::value(&raw.batch),
      "samples per rank per step (default: the model's reference CPU batch)")(
      "iters,n", po::value(&raw.iterations)->default_value(defaults.measured_iterations),
      "measured iterations")("warmup,w",
                             po::value(&raw.warmup)->default_value(defaults.warmup_iterations),
                             "warm-up iterations, recorded but left out of the statistics")(
      "lr", number_with_default(&options.learning_rate, defaults.learning_rate),
      "learning rate")(
      "optimizer", po::value(&raw.optimizer)->default_value(raw.optimizer),
      "sgd (heavy-ball momentum 0.9) or adamw (betas 0.9 and 0.999, eps 1e-8, decoupled weight "
      "decay 0.01: torch.optim.AdamW's defaults)")(
      "sharding", po::value(&raw.sharding)->default_value(raw.sharding),
      "none (every rank updates every parameter: DDP), optimizer or gradients (ZeRO stages 1 "
      "and 2: gradients reduce-scattered bucket by bucket, each rank updates its shard of the "
      "parameters and optimizer state, parameters all-gathered after), full (ZeRO-3, FSDP: "
      "parameters live sharded too, each unit all-gathered just before it runs, forward and "
      "backward; see --shard-unit-mb), or a list (none,optimizer,full) to measure each against "
      "its own baseline")(
      "sharding-group", po::value(&raw.sharding_group)->default_value(raw.sharding_group),
      "whom a sharded point shards over: all (every rank) or node (the ranks of each host, "
      "the shards replicated across hosts: hybrid sharding, FSDP's HYBRID_SHARD; gathers stay "
      "within a host, and each shard's sum is allreduced across hosts). node needs the same "
      "number of ranks on every host")(
      "seed", po::value(&raw.seed)->default_value((long long)defaults.seed),
      "seed for weights and synthetic data");
  // clang-format on

  po::options_description system("System");
  // clang-format off
  system.add_options()
      ("threads,t", po::value(&raw.threads)->default_value(raw.threads),
       "compute threads per rank (OpenBLAS and OpenMP), or a list (1,2,4,8) to measure each "
       "in this launch; keep ranks x threads <= physical cores. Refused where a rank's "
       "affinity allows fewer CPUs than threads (a launcher that binds each rank to one core). "
       "Inside a Slurm job the default is SLURM_CPUS_PER_TASK")
      ("oversubscribe", po::bool_switch(&options.oversubscribe),
       "allow --threads above this host's logical CPUs, or above the CPUs a rank is bound to "
       "(refused otherwise)")
      ("device", po::value(&options.device)->default_value(defaults.device),
       ("where each rank computes: " + listed_choices(kernels::device_records(), true)).c_str())
      ("precision", po::value(&raw.precisions)->default_value(raw.precisions),
       "float math of GEMMs, convolutions and LSTMs: fp32 (float products); tf32 (GPU: TF32 "
       "tensor cores, as PyTorch's allow_tf32); bf16 (bf16 inputs and weights, float "
       "accumulation, as PyTorch's autocast; parameters, gradients and the update stay float); "
       "or a list (fp32,bf16) to measure each in this launch, each against its own baseline")
      ("comm", po::value(&options.comm)->default_value(defaults.comm),
       ("gradient allreduce backend: " + listed_choices(comm::backend_records(), true)).c_str())
      ("grad-dtype", po::value(&options.grad_dtype)->default_value(defaults.grad_dtype),
       "what the ranks sum: fp32 gradients, or bf16 roundings of them (half the bytes, as DDP's "
       "bf16 compression hook; every backend); every rank keeps float gradients either way");
  // clang-format on

  po::options_description scaling("Scaling study (one launch, growing groups of ranks)");
  // clang-format off
  scaling.add_options()(
      "ranks", po::value(&options.ranks),
      "run on the first N ranks for each N in a comma-separated list (e.g. 1,2,4), or 'all': "
      "powers of two up to the launch's size, and that size; the other ranks wait. One "
      "results file holds every point. A launch larger than its largest point then probes, "
      "without training, how compute slows at each doubling of it and at the launch's size "
      "(each bounded as --probe says), for `dlscale predict`")(
      "scaling", po::value(&options.scaling)->default_value(defaults.scaling),
      "weak: every rank keeps --batch; strong: --global-batch is split over the ranks")(
      "global-batch", po::value(&raw.global_batch),
      "samples per step over all ranks, for --scaling strong (implies it)")(
      "repeat", po::value(&raw.repeats)->default_value(raw.repeats),
      "run every sweep point N times, each with its own seed (--seed, --seed+1, ...): the "
      "study reports the mean and spread across repeats")(
      "point-timeout",
      number_with_default(&options.point_timeout_seconds, defaults.point_timeout_seconds),
      "seconds a sweep point may train before it is stopped and recorded as failed; 0: no "
      "limit")(
      "stall-timeout", po::value(&raw.stall_timeout)->default_value(raw.stall_timeout),
      "seconds without a heartbeat from a rank, or without any rank finishing an iteration, "
      "after which the job ends, naming the ranks and hosts (exit 4); the finished points stay "
      "in the results file. auto: 10x the slowest step so far, at least 60; 0: off");
  // clang-format on

  po::options_description convergence("Convergence: time to a target, not only throughput");
  // clang-format off
  convergence.add_options()(
      "eval-every", po::value(&raw.evaluate_every),
      "evaluate held-out accuracy and loss every K iterations (outside the timed step and the "
      "training clock), on a validation set drawn from its own stream and never trained on "
      "(default: 10 with a target, else never)")(
      "eval-samples", po::value(&raw.evaluation_samples)->default_value(raw.evaluation_samples),
      "samples in the validation set, split over the ranks")(
      "target-accuracy", po::value(&raw.target_accuracy),
      "train each point until held-out accuracy reaches A (0 < A <= 1), then stop: iterations, "
      "samples and seconds to target are recorded, and a point that reaches the --max-samples "
      "limit first is kept as a failed point. The prototype tasks' best accuracy is 1, the "
      "LSTM's Markov task's 0.5 (docs/workloads.md)")(
      "target-loss", po::value(&raw.target_loss),
      "as --target-accuracy, until held-out loss (nats) falls to L")(
      "max-samples", po::value(&raw.max_samples)->default_value(raw.max_samples),
      "with a target: the samples (all ranks) a point may train on before it fails; replaces "
      "--iters")(
      "lr-scaling", po::value(&raw.learning_rate_scaling)->default_value(raw.learning_rate_scaling),
      "large-batch rule: none; linear (--lr x global batch / --lr-batch, Goyal et al. 2017); "
      "sqrt (x its square root)")(
      "lr-batch", po::value(&raw.lr_batch),
      "the global batch that --lr is for, under --lr-scaling (default: the sweep's smallest); "
      "give it to compare launches of different batches")(
      "warmup-steps", po::value(&raw.lr_warmup)->default_value(raw.lr_warmup),
      "ramp the learning rate linearly from --lr to the scaled rate over the first N steps "
      "(needs --lr-scaling linear or sqrt)");
  // clang-format on

  po::options_description measuring("Measuring");
  // clang-format off
  measuring.add_options()(
      "sample-interval",
      number_with_default(&options.sample_interval_seconds, defaults.sample_interval_seconds),
      "seconds between resource samples on every rank (process and host CPU, memory, GPU "
      "utilisation and power through NVML, CPU package energy through RAPL); 0 turns "
      "sampling off")(
      "probe", po::value(&raw.probe)->default_value(raw.probe), probe_help().c_str())(
      "no-yardstick", po::bool_switch(),
      "leave out the GEMM yardstick, rank 0's fastest square GEMM at the run's precision, "
      "timed for at least 0.5 s before and again after each point: the summary then gives no "
      "MFU and the results file records device_gemm_gflops as 0 (not measured). For quick "
      "comparisons of step time");
  // clang-format on

  po::options_description gradients("Gradient exchange");
  // clang-format off
  gradients.add_options()(
      "bucket-mb", number_with_default(&options.bucket_mb, defaults.bucket_mb),
      "sum gradients across ranks in buckets of this many MiB, last layers first, as "
      "PyTorch DDP does; 0 for one bucket with every gradient")(
      "no-overlap", po::bool_switch(),
      "sum the buckets with blocking calls after backward, instead of starting each one "
      "(non-blocking) as soon as backward has produced it")(
      "shard-unit-mb", number_with_default(&options.shard_unit_mb, defaults.shard_unit_mb),
      "--sharding full: whole layers, last first, grouped into units of at least this many "
      "MiB of parameters (FSDP's wrapped modules); each unit is all-gathered before its "
      "forward and its backward, and its gradients reduce-scattered. Two units' parameters "
      "and gradients are held whole at a time");
  // clang-format on

  po::options_description output("Output");
  // clang-format off
  output.add_options()(
      "out,o", po::value(&options.output_path),
      "results file (HDF5; default dlscale-MODEL-NPr-TIME.h5 in the current directory)")(
      "overwrite", po::bool_switch(&options.overwrite), "replace an existing results file")(
      "quiet,q", po::bool_switch(&options.quiet),
      "print one line per point (its ranks, throughput and verdict: compute-, communication- "
      "or straggler-bound, the share of the GEMM yardstick, oversubscription, a yardstick that "
      "moved) instead of its whole summary, and of the study only its verdict; the results "
      "file is the same")(
      "log-level", po::value(&options.log_level)->default_value(defaults.log_level),
      "trace, debug, info, warn or error");
  // clang-format on
  po::options_description all;
  all.add(workload)
      .add(scaling)
      .add(convergence)
      .add(gradients)
      .add(system)
      .add(measuring)
      .add(output);
  return all;
}

po::options_description informational_options(std::string& config_path) {
  po::options_description general("General");
  // clang-format off
  general.add_options()("help,h", "show this help and exit")(
      "version", "show the version and exit")("list-models",
                                              "list the built-in models with their sizes and exit")(
      "config", po::value(&config_path),
      "read options from FILE, one 'key = value' per line with the long option names; "
      "the command line wins");
  // clang-format on
  return general;
}

// The text of a --config file: a regular file of reasonable size, read whole, so a device or a
// huge file cannot grow the process without bound.
std::string read_config_file(const std::string& path) {
  constexpr std::uintmax_t largest_config_bytes = 1 << 20;
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status))
    throw UserError(fmt::format("--config: cannot read '{}'", path));
  if (!std::filesystem::is_regular_file(status))
    throw UserError(fmt::format("--config: '{}' is not a regular file", path));
  if (std::filesystem::file_size(path, error) > largest_config_bytes || error)
    throw UserError(
        fmt::format("--config: '{}' is larger than 1 MiB; a config file holds "
                    "'key = value' lines",
                    path));
  std::ifstream file(path);
  if (!file) throw UserError(fmt::format("--config: cannot read '{}'", path));
  return {std::istreambuf_iterator<char>(file), {}};
}

// The line of a config file's text where `key` (an option's long name) is set, counted from 1;
// 0 if no line sets it.
int config_line_of(const std::string& text, std::string_view key) {
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, key.size(), key) != 0) continue;
    const auto next = line.find_first_not_of(" \t", start + key.size());
    if (next != std::string::npos && line[next] == '=') return number;
  }
  return 0;
}

// Adds the options of a --config file to `values`. A mistake in it is told with the file and,
// where it can be found, the line: "--config run.ini line 3: unrecognised option 'iterations'
// (did you mean '--iters'?)".
void store_config_file(const std::string& path, const po::options_description& options,
                       po::variables_map& values) {
  const std::string text = read_config_file(path);
  try {
    std::istringstream file(text);
    const auto from_file = po::parse_config_file(file, options);
    for (const auto& option : from_file.options)
      if (option.string_key == "config")
        throw UserError(
            fmt::format("--config {} line {}: a config file cannot name another "
                        "with 'config ='",
                        path, config_line_of(text, "config")));
    po::store(from_file, values);
  } catch (const po::error& error) {
    std::string where = path;
    if (const auto* named = dynamic_cast<const po::error_with_option_name*>(&error)) {
      std::string key = named->get_option_name();
      key.erase(0, key.find_first_not_of('-'));
      if (const int line = config_line_of(text, key); line > 0)
        where += fmt::format(" line {}", line);
    }
    throw UserError(fmt::format("--config {}: {}", where, option_error(error, options).what()));
  }
}

int positive(long long value, const char* option) {
  if (value < 1 || value > INT32_MAX)
    throw UserError(fmt::format("--{} must be a positive integer, got {}", option, value));
  return int(value);
}

// The precisions of --precision NAME[,NAME...], in the order given, each one the device offers.
std::vector<kernels::Precision> parse_precisions(const std::string& text,
                                                 const std::string& device_name) {
  const std::vector<kernels::Precision> precisions =
      parse_name_list(text, "--precision", [](const std::string& name) {
        return enum_named(kernels::precision_names, name, "--precision", "precision");
      });
  for (const kernels::Precision precision : precisions) {
    const std::string name = kernels::precision_names(precision);
    std::vector<std::string> offering;
    for (const kernels::DeviceRecord& device : kernels::device_records())
      if (offers(device, precision)) offering.push_back(fmt::format("--device {}", device.name));
    for (const kernels::DeviceRecord& device : kernels::device_records())
      if (device.name == device_name && !offers(device, precision)) {
        std::vector<std::string> its;
        for (const kernels::Precision own : device.precisions)
          its.push_back(kernels::precision_name(own));
        throw UserError(fmt::format("--precision {} is for {}; --device {} computes in {}", name,
                                    fmt::join(offering, " or "), device.name,
                                    fmt::join(its, " or ")));
      }
  }
  return precisions;
}

// The strategies of --sharding NAME[,NAME...], in the order given.
std::vector<results::Sharding> parse_shardings(const std::string& text) {
  std::vector<results::Sharding> shardings;
  for (const std::string_view field : split_list(text)) {
    const std::string name(field);
    require_choice("--sharding", "strategy", name, results::sharding_names.all());
    const results::Sharding sharding = *results::sharding_names.named(name);
    if (std::find(shardings.begin(), shardings.end(), sharding) != shardings.end())
      throw UserError(fmt::format("--sharding {}: {} is listed twice", text, name));
    shardings.push_back(sharding);
  }
  return shardings;
}

// Held-out evaluation, the target and the learning-rate rule.
void check_convergence_values(RunOptions& options, const RawNumbers& raw,
                              const po::variables_map& values) {
  if (values.count("target-accuracy") && values.count("target-loss"))
    throw UserError("--target-accuracy and --target-loss: give one target");
  if (values.count("target-accuracy")) {
    if (!(raw.target_accuracy > 0 && raw.target_accuracy <= 1))
      throw UserError(
          fmt::format("--target-accuracy must be in (0, 1], got {}", raw.target_accuracy));
    options.target = results::Target{results::TargetMetric::accuracy, raw.target_accuracy};
  }
  if (values.count("target-loss")) {
    if (!(raw.target_loss > 0 && raw.target_loss < results::bounds::largest_target_loss))
      throw UserError(fmt::format("--target-loss must be in (0, {}) nats, got {}",
                                  results::bounds::largest_target_loss, raw.target_loss));
    options.target = results::Target{results::TargetMetric::loss, raw.target_loss};
  }
  const bool target = options.target.has_value();
  if (values.count("eval-every")) {
    if (raw.evaluate_every < 0 || raw.evaluate_every > INT32_MAX)
      throw UserError(fmt::format("--eval-every must be 0 (never) or a positive integer, got {}",
                                  raw.evaluate_every));
    options.evaluate_every = int(raw.evaluate_every);
    if (target && options.evaluate_every == 0)
      throw UserError("a target is checked at each evaluation: --eval-every must not be 0");
  } else if (target) {
    options.evaluate_every = 10;
  }
  options.evaluation_samples = positive(raw.evaluation_samples, "eval-samples");
  if (raw.max_samples < 1 || raw.max_samples > (1LL << 50))
    throw UserError(fmt::format("--max-samples must be a positive integer up to 2^50, got {}",
                                raw.max_samples));
  options.max_samples = raw.max_samples;
  if (!values["max-samples"].defaulted() && !target)
    throw UserError(
        "--max-samples limits training to a target: give --target-accuracy or "
        "--target-loss, or use --iters");
  if (target && !values["iters"].defaulted())
    throw UserError(
        "with a target, each point trains until it reaches it or --max-samples: "
        "leave out --iters");
  options.optimizer =
      enum_named(results::optimizer_names, raw.optimizer, "--optimizer", "optimizer");
  options.sharding_group =
      enum_named(results::sharding_group_names, raw.sharding_group, "--sharding-group", "group");
  options.shardings = parse_shardings(raw.sharding);
  options.learning_rate_scaling = enum_named(results::learning_rate_scaling_names,
                                             raw.learning_rate_scaling, "--lr-scaling", "rule");
  if (raw.lr_warmup < 0 || raw.lr_warmup > INT32_MAX)
    throw UserError(
        fmt::format("--warmup-steps must be zero or a positive integer, got {}", raw.lr_warmup));
  options.learning_rate_warmup_steps = int(raw.lr_warmup);
  if (values.count("lr-batch")) {
    options.learning_rate_batch = positive(raw.lr_batch, "lr-batch");
    if (options.learning_rate_scaling == results::LearningRateScaling::none)
      throw UserError(
          "--lr-batch is the batch --lr-scaling scales from: give --lr-scaling "
          "linear or sqrt");
  }
  if (options.learning_rate_warmup_steps > 0 &&
      options.learning_rate_scaling == results::LearningRateScaling::none)
    throw UserError(
        "--warmup-steps ramps from --lr to the scaled rate: give --lr-scaling linear "
        "or sqrt");
}

void check_values(RunOptions& options, const RawNumbers& raw, const po::variables_map& values) {
  if (values.count("batch")) options.batch = positive(raw.batch, "batch");
  options.measured_iterations = positive(raw.iterations, "iters");
  options.threads = parse_count_list(raw.threads, "--threads", most_threads, "thread count");
  // In a Slurm job that asked for --cpus-per-task, that is the natural thread count.
  if (values["threads"].defaulted())
    if (const auto cpus = worker::slurm_cpus_per_task()) options.threads = {*cpus};
  options.repeats = positive(raw.repeats, "repeat");
  if (options.repeats > most_repeats)
    throw UserError(
        fmt::format("--repeat must be at most {}, got {}", most_repeats, options.repeats));
  if (!(options.sample_interval_seconds == 0 ||
        (options.sample_interval_seconds >= 0.01 && options.sample_interval_seconds <= 3600)))
    throw UserError(
        fmt::format("--sample-interval must be 0 (off) or between 0.01 and 3600 "
                    "seconds, got {}",
                    options.sample_interval_seconds));
  if (!(options.point_timeout_seconds >= 0) || options.point_timeout_seconds > 1e7)
    throw UserError(
        fmt::format("--point-timeout must be 0 (no limit) or a number of seconds, "
                    "got {}",
                    options.point_timeout_seconds));
  const std::optional<bool> probe = yes_no_names.named(raw.probe);
  if (!probe) throw UserError(fmt::format("--probe must be yes or no, got '{}'", raw.probe));
  options.probe_node_sharing = *probe;
  if (raw.stall_timeout == automatic_stall_timeout) {
    options.stall_timeout_seconds = -1;
  } else {
    try {
      std::size_t used = 0;
      options.stall_timeout_seconds = std::stod(raw.stall_timeout, &used);
      if (used != raw.stall_timeout.size()) throw std::invalid_argument("trailing text");
    } catch (const std::exception&) {
      options.stall_timeout_seconds = std::nan("");
    }
    const double timeout = options.stall_timeout_seconds;
    if (!(timeout == 0 || (timeout >= 2 && timeout <= 1e7)))
      throw UserError(
          fmt::format("--stall-timeout must be auto, 0 (off) or 2 to 1e7 seconds, "
                      "got '{}'",
                      raw.stall_timeout));
  }
  if (raw.warmup < 0 || raw.warmup > INT32_MAX)
    throw UserError(fmt::format("--warmup must be zero or a positive integer, got {}", raw.warmup));
  options.warmup_iterations = int(raw.warmup);
  if (raw.seed < 0) throw UserError(fmt::format("--seed must not be negative, got {}", raw.seed));
  options.seed = std::uint64_t(raw.seed);
  // Large rates are allowed: a diverging point is a result too.
  if (!(options.learning_rate > 0) || options.learning_rate > 1e12)
    throw UserError(fmt::format("--lr must be in (0, 1e12], got {}", options.learning_rate));
  options.precisions = parse_precisions(raw.precisions, options.device);
  require_choice("--grad-dtype", "gradient dtype", options.grad_dtype,
                 comm::gradient_dtype_names.all());
  options.scaling_given = !values["scaling"].defaulted();
  require_choice("--scaling", "mode", options.scaling,
                 {results::scaling_name(results::Scaling::weak),
                  results::scaling_name(results::Scaling::strong)});
  if (values.count("global-batch")) {
    options.global_batch = positive(raw.global_batch, "global-batch");
    if (options.scaling_given &&
        results::scaling_names.named(options.scaling) == results::Scaling::weak)
      throw UserError(
          "--global-batch is for --scaling strong; weak scaling keeps --batch per rank");
    options.scaling = results::scaling_name(results::Scaling::strong);
  }
  if (results::scaling_names.named(options.scaling) == results::Scaling::strong) {
    if (!options.global_batch)
      throw UserError("--scaling strong needs --global-batch, the batch split over the ranks");
    if (options.batch)
      throw UserError("--batch is per rank; with --scaling strong give --global-batch only");
  }
  if (!(options.bucket_mb >= 0) || options.bucket_mb > 1e6)
    throw UserError(
        fmt::format("--bucket-mb must be between 0 and 1e6 MiB, got {}", options.bucket_mb));
  options.overlap = !values["no-overlap"].as<bool>();
  options.gemm_yardstick = !values["no-yardstick"].as<bool>();
  if (!(options.shard_unit_mb > 0) || options.shard_unit_mb > 1e6)
    throw UserError(fmt::format(
        "--shard-unit-mb must be above 0 and at most 1e6 MiB (a unit is at least one layer), "
        "got {}",
        options.shard_unit_mb));
  if (options.output_path.empty() && values.count("out"))
    throw UserError("--out must not be empty");
  // An empty list would otherwise mean "no sweep", silently.
  if (options.ranks.empty() && values.count("ranks"))
    throw UserError("--ranks must not be empty: give rank counts such as 1,2,4, or all");
  require_choice("--log-level", "level", options.log_level,
                 {"trace", "debug", "info", "warn", "error"});
  check_convergence_values(options, raw, values);
  const bool fully_sharded = std::find(options.shardings.begin(), options.shardings.end(),
                                       results::Sharding::full) != options.shardings.end();
  if (fully_sharded && !options.overlap)
    throw UserError(
        "--sharding full reduce-scatters each unit's gradients as its backward ends (two units' "
        "gradients are held at a time): leave out --no-overlap");
  if (fully_sharded && options.evaluate_every > 0)
    throw UserError(
        "--sharding full does not evaluate held-out data yet (every rank would have to run the "
        "same number of evaluation batches to gather each unit in step): leave out --eval-every "
        "and the target, or use --sharding none, optimizer or gradients");
}

}  // namespace

RunOptions parse_run_options(const std::vector<std::string>& arguments) {
  RunOptions options;
  RawNumbers raw;
  std::string config_path;
  po::options_description visible;
  visible.add(informational_options(config_path)).add(option_descriptions(options, raw));
  po::variables_map values;
  try {
    const auto parsed = po::command_line_parser(arguments)
                            .options(visible)
                            .style(strict_command_line_style())
                            .run();
    refuse_stray_arguments(parsed);
    po::store(parsed, values);
    if (values.count("config"))
      store_config_file(values["config"].as<std::string>(), visible, values);
    po::notify(values);
  } catch (const po::error& error) {
    throw option_error(error, visible);
  }
  if (values.count("help"))
    options.action = RunOptions::Action::show_help;
  else if (values.count("version"))
    options.action = RunOptions::Action::show_version;
  else if (values.count("list-models"))
    options.action = RunOptions::Action::list_models;
  else
    check_values(options, raw, values);
  options.config_path = config_path;
  return options;
}

std::vector<int> sweep_rank_counts(const RunOptions& options, int world_size) {
  if (options.ranks.empty()) return {world_size};
  std::vector<int> counts;
  if (options.ranks == every_doubling_of_ranks) {
    for (int n = 1; n < world_size; n *= 2) counts.push_back(n);
    counts.push_back(world_size);
    return counts;
  }
  counts = parse_count_list(options.ranks, "--ranks", INT32_MAX, "rank count");
  if (counts.back() > world_size)
    throw UserError(
        fmt::format("--ranks: {} ranks asked for, but the launch has only {} "
                    "(mpirun -np {})",
                    counts.back(), world_size, world_size));
  return counts;
}

std::vector<int> batches_per_rank(const RunOptions& options, const std::vector<int>& rank_counts,
                                  int default_batch) {
  std::vector<int> batches;
  for (int n : rank_counts) {
    if (results::scaling_names.named(options.scaling) == results::Scaling::weak) {
      batches.push_back(options.batch.value_or(default_batch));
      continue;
    }
    if (*options.global_batch % n != 0)
      throw UserError(
          fmt::format("--global-batch {} cannot be split evenly over {} ranks; "
                      "choose a multiple of every rank count in the sweep",
                      *options.global_batch, n));
    batches.push_back(*options.global_batch / n);
  }
  return batches;
}

results::Scaling recorded_scaling(const RunOptions& options) {
  const bool study = !options.ranks.empty() || options.scaling_given || options.global_batch;
  return study ? *results::scaling_names.named(options.scaling) : results::Scaling::none;
}

std::string run_help_text() {
  RunOptions options;
  RawNumbers raw;
  std::string config_path;
  po::options_description visible(100, 50);
  visible.add(informational_options(config_path)).add(option_descriptions(options, raw));
  std::ostringstream text;
  text << "dlscale: how well does data-parallel training scale on this machine, and where does\n"
          "the time go? Every MPI rank trains the same model on its own synthetic data and the\n"
          "ranks average gradients with an allreduce. Rank 0 gathers per-rank, per-iteration\n"
          "phase timings (forward, backward, allreduce, update, step), prints a summary and\n"
          "writes everything to one HDF5 file.\n\n"
          "Usage: mpirun -np N dlscale [run] [options]\n\n"
          "Other subcommands (each has --help):\n"
          "  mpirun -np N dlscale comm    allreduce sweep over message sizes, with an alpha-beta "
          "fit\n"
          "  dlscale report FILE...       tables, CSV/JSON, figures and an HTML page\n"
          "  dlscale predict FILE         step time and efficiency at rank counts you cannot try\n"
          "  dlscale merge A B -o S       one study from the runs of several jobs\n"
          "  dlscale slurm                a Slurm node-count study script for your sizes\n"
          "  dlscale schema [--json]      the /study columns results files hold, with units\n\n"
       << visible
       << "\nExamples:\n"
          "  mpirun -np 4 dlscale --model fcn-r --batch 64 --iters 20 --out r.h5\n"
          "  mpirun -np 2 dlscale --model fcn:784,512,10 --threads 1\n"
          "  mpirun -np 4 dlscale --model fcn-r --batch 128 --ranks 1,2,4 --out s.h5   # weak "
          "study\n"
          "  mpirun -np 4 dlscale --model resnet-56 --ranks all --global-batch 256    # strong\n"
          "  mpirun -np 8 dlscale --device cuda --comm nccl --model resnet-50 --precision tf32\n"
          "  mpirun -np 2 dlscale --model resnet-56 --precision bf16 --grad-dtype bf16   # CPU "
          "bf16\n"
          "  mpirun -np 2 dlscale --model resnet-56 --precision fp32,bf16 --ranks 1,2   # what "
          "bf16 costs in efficiency\n"
          "  mpirun -np 2 dlscale --model fcn-r --threads 1,2 --repeat 3   # threads, mean +- "
          "spread\n"
          "  dlscale report s.h5 --html r.html\n"
          "  dlscale --list-models\n\n"
          "Environment (each read once; a value it does not know stops the run in one line):\n"
          "  DLSCALE_CPU_GEMM=onednn|openblas   force the CPU's float GEMM library (default\n"
          "                                     fastest: the faster per shape, timed first)\n"
          "  DLSCALE_CUDNN_API=legacy|graph     GPU convolutions on cuDNN's descriptor API\n"
          "                                     (NCHW) or graph API (NHWC); default: legacy\n"
          "                                     under fp32, else graph\n"
          "  DLSCALE_CUDNN_LSTM=bf16|float      the GPU LSTM under bf16 (default bf16)\n"
          "  DLSCALE_CUDNN_ATTENTION=sdpa|gemm  a GPT's GPU attention under bf16: cuDNN's\n"
          "                                     fused one (default), or GEMMs and a softmax\n"
          "  DLSCALE_CUDA_IMAGE_ACTIVATIONS=bf16|float\n"
          "                                     GPU images between layers, under bf16 on the\n"
          "                                     graph path (default bf16, as autocast keeps them)\n"
          "  DLSCALE_CUDA_BATCHED_GEMM=cublas|loop, DLSCALE_CUDA_LAYER_NORM_GRADIENT=\n"
          "  tiled|serial, DLSCALE_CUDA_PADDED_BF16_ROWS=yes|no, DLSCALE_CUDA_BATCHED_LOADS=\n"
          "  yes|no, DLSCALE_CUDA_GEMM_BIAS_EPILOGUE=yes|no, DLSCALE_CUDNN_WORKSPACE_MIB=4096,\n"
          "  DLSCALE_CUDNN_LSTM_STACK=yes|no, DLSCALE_CUDNN_BUILD_THREADS=1,\n"
          "  DLSCALE_CUDNN_KERNEL_CACHE=no|yes, DLSCALE_CUDNN_PRUNED_SEARCH=no|yes,\n"
          "  DLSCALE_CUDA_FAST_DIVMOD=yes|no, DLSCALE_CUDA_NCHW_BIAS_RELU=cudnn|fused,\n"
          "  DLSCALE_CUDA_NCHW_POOLING=cudnn|own, DLSCALE_CUDA_NCHW_BATCH_NORM=cudnn|own,\n"
          "  DLSCALE_CUDNN_GRAPH_VERBOSE=1 (of each pair, the first is the default):\n"
          "  docs/gpu.md; DLSCALE_PYTHON (for report): docs/report.md. Under mpirun, pass\n"
          "  them on with -x NAME.\n\n"
          "Exit status: 0 on success, 2 for a bad option or input, 1 for a failure while running,\n"
          "3 when some sweep points could not be measured (out of memory, diverged, past\n"
          "--point-timeout): they are kept in the results file with the reason; 4 when a rank\n"
          "stalled (--stall-timeout); 128+N after signal N (143: SIGTERM, as Slurm sends at a\n"
          "time limit; 130: SIGINT; 129: SIGHUP): every finished point is kept, and the point\n"
          "under way is kept as far as it got, marked partial. The results file is rewritten as\n"
          "each point finishes, so even a killed job keeps its finished points.\n"
          "The results file is documented in docs/results-format.md.\n";
  return text.str();
}

}  // namespace dlscale::cli
