// The device registry: one record per device (its name, one line of help, what it offers and how
// it is made), from which the command line builds its help, its checks and its messages.
// docs/extending.md lists what a new device touches.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/device.hpp"

namespace dlscale::kernels {

enum class DeviceKind { cpu, cuda };

// What a device is made with: CPU threads, float precision on GPUs, and the rank's index on its
// host, which picks its GPU (local_rank % visible GPUs).
struct DeviceSettings {
  int compute_threads = 1;
  Precision precision = Precision::fp32;
  int local_rank = 0;
};

struct DeviceRecord {
  DeviceKind kind;
  const char* name;  // as --device takes it and results files record it
  const char* help;  // what --help says of it: where the work runs and which libraries do it
  // Device memory is host memory: MPI sums it in place, with no staging.
  bool memory_is_host;
  // The --precision values it computes in (fp32 always).
  std::vector<Precision> precisions;
  // Why this dlscale cannot make the device (it was built without its libraries), or null.
  const char* (*unbuilt_reason)();
  // How many devices of this kind one host offers its ranks (ranks beyond share them).
  int (*devices_per_host)();
  // Throws UserError when this process cannot have one (no GPU visible, say).
  std::unique_ptr<Device> (*make)(const DeviceSettings& settings);
};

bool offers(const DeviceRecord& device, Precision precision);

// Every device, in the order help texts list them.
std::span<const DeviceRecord> device_records();
const DeviceRecord& device_record(DeviceKind kind);

// The record named `name` (--device). Throws UserError naming the devices unless it is one of
// them, and when this dlscale was built without it.
const DeviceRecord& find_device(const std::string& name);

}  // namespace dlscale::kernels
