// The ring allreduce's cost structure, used to turn times into bus bandwidth and a fitted line into
// per-hop latency and bandwidth. In a ring over n ranks each rank takes 2(n-1) steps
// (reduce-scatter then allgather) and sends 2(n-1)/n of the message (Patarasuk & Yuan, "Bandwidth
// optimal all-reduce algorithms for clusters of workstations", 2009; nccl-tests'
// doc/PERFORMANCE.md).
#pragma once

namespace dlscale::analysis {

// Latency terms of one ring allreduce: t = ring_allreduce_steps(n)*alpha + ... .
inline double ring_allreduce_steps(int ranks) { return 2.0 * (ranks - 1); }

// Bytes each rank sends per byte of message; busbw = algbw * this (0 for one rank).
inline double allreduce_bus_factor(int ranks) { return 2.0 * (ranks - 1) / double(ranks); }

}  // namespace dlscale::analysis
