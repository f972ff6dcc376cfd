// What a run found, in one verdict: where its iteration time went (compute, exposed communication
// or waiting for stragglers), how close its compute came to the device's measured GEMM rate
// (MFU), and whether anything makes its numbers unrepresentative (oversubscribed cores, a
// yardstick that moved). A pure function of the run's record; printers/summary_printer.cpp says it
// in a line.
#pragma once

#include <limits>
#include <vector>

#include "results/run_record.hpp"

namespace dlscale::analysis {

// Yardstick measurements before and after a point further apart than this, relative to the
// faster, moved for a reason: ten in a row on this 2-core VM with nothing else running in it
// spanned 4-5% at one thread and 4-8% at two (its host is shared too); beside other jobs, 17-56%.
inline constexpr double yardstick_moved_fraction = 0.1;

// A rank whose compute threads got less than this share of a core each, on average, shared its
// cores with other busy threads: alone they keep their cores busy while computing (a rank waiting
// in MPI polls and stays busy too). The oversubscribed quickstart measured 0.09.
inline constexpr double least_cores_per_thread = 0.5;

enum class Bound { compute, communication, stragglers };

const char* bound_name(Bound bound);  // "compute", "communication", "straggler"

struct RunVerdict {
  // Shares of the mean iteration time (the slowest rank's step): exposed communication (the
  // fastest rank's allreduce), waiting for stragglers (max - mean compute across ranks), and the
  // rest, compute. They sum to 1. The largest names the bound.
  double communication_share = 0;
  double straggler_share = 0;
  double compute_share = 1;
  Bound bound = Bound::compute;
  // Achieved GFLOP/s per rank (the mean over ranks of each one's median step), and the run's MFU:
  // its fraction of the GEMM yardstick measured on this device at the run's precision, as the
  // summary holds it (results/run_record.hpp); NaN without a yardstick.
  double mean_gflops = 0;
  double yardstick_gflops = 0;
  double model_flops_utilisation = std::numeric_limits<double>::quiet_NaN();
  // The yardstick's change from before the point to after it, relative to before, and whether it
  // is more than yardstick_moved_fraction of the faster.
  double yardstick_change = 0;
  bool yardstick_moved = false;
  // Oversubscribed: a rank's affinity allowed fewer CPUs than it had compute threads, or on a
  // CPU device its threads used less than least_cores_per_thread of a core each.
  bool oversubscribed = false;
  int threads = 0;
  double allowed_cpus = std::numeric_limits<double>::quiet_NaN();  // mean over ranks; NaN: unknown
  double cores_used = std::numeric_limits<double>::quiet_NaN();    // per rank; NaN: not sampled
};

RunVerdict run_verdict(const results::RunRecord& record);

// Whether the run trained on a GPU: its device names one (a gpu_name property). Its host cores
// then mostly wait, and its tensors live in the GPU's memory, not the process's.
bool trained_on_a_gpu(const results::RunRecord& record);

// A study's verdict: that of its run with the most ranks (where scaling loses the most; the last
// such, a repeat's), and how many points were oversubscribed or saw their yardstick move.
struct StudyVerdict {
  RunVerdict largest;
  int largest_ranks = 0;
  int points = 0;
  int oversubscribed_points = 0;
  int yardstick_moved_points = 0;
};

StudyVerdict study_verdict(const std::vector<results::RunRecord>& runs);

}  // namespace dlscale::analysis
