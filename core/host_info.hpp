// What a rank knows about the machine it runs on: its name and its memory.
#pragma once

#include <cstdint>
#include <string>

namespace dlscale {

std::string host_name();

// Memory this host can still give: MemAvailable, or less if a cgroup (a Slurm job, say) caps it.
std::uint64_t available_memory_bytes();

// Logical CPUs online on this host.
int logical_cpu_count();

// CPUs this process may run on: its affinity mask, as mpirun --bind-to or srun --cpu-bind set
// it; 0 where the mask cannot be read.
int allowed_cpu_count();

// Distinct physical cores (core id per package in /proc/cpuinfo); the logical CPUs online where
// /proc/cpuinfo does not say.
int physical_core_count();

// This process's peak resident set size so far.
std::uint64_t peak_resident_bytes();

// Hands the heap's free memory back to the kernel (malloc_trim). Buffers below glibc's mmap
// threshold (up to 32 MiB, raised as large blocks are freed) come from the heap, which keeps what
// is freed: without this, a rank that trained a large point holds its memory through the next
// points of the sweep, and their memory checks see it as taken.
void return_free_memory_to_the_system();

// This process's address-space limit (RLIMIT_AS, `ulimit -v`) in bytes, or 0 where there is none.
std::uint64_t address_space_limit_bytes();

}  // namespace dlscale
