// The NVML probe: the rank's GPU's utilisation, memory, power, SM clock, temperature and clock
// event (throttle) reasons at every tick, and its energy over the window. Where NVML cannot be
// loaded or initialised, every GPU measurement is absent with NVML's reason.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/sampling/nvml_library.hpp"
#include "worker/sampling/probe.hpp"

namespace dlscale::worker {

class NvmlProbe final : public Probe {
 public:
  // `gpu_index` is the rank's CUDA device ordinal. CUDA numbers only the devices in
  // CUDA_VISIBLE_DEVICES, so an ordinal is mapped through it: an integer entry is NVML's index,
  // a GPU-/MIG- entry a UUID. Without it the ordinal is taken as NVML's index, which is right
  // when CUDA orders devices by PCI bus (CUDA_DEVICE_ORDER=PCI_BUS_ID) or they are all alike.
  explicit NvmlProbe(int gpu_index);
  ~NvmlProbe() override;

  std::string absent_reason() const override { return absent_reason_; }
  // gpu_utilisation_percent, gpu_memory_used_bytes, gpu_power_watts, gpu_sm_clock_mhz,
  // gpu_temperature_c, gpu_throttle_reasons.
  std::vector<results::Measurement> series() const override;
  std::vector<double> read(double seconds) override;
  // gpu_energy_joules: the energy counter's difference, or integrated power where this GPU has
  // no counter (before Volta).
  std::vector<results::Measurement> totals() const override;

  static constexpr std::size_t series_count = 6;

 private:
  // One value per series where NVML answered; `codes`, when given, gets every return code.
  std::array<std::optional<double>, series_count> read_fields(
      std::array<nvml::Return, series_count>* codes = nullptr) const;

  std::unique_ptr<nvml::Library> library_;
  nvml::Device device_ = nullptr;
  std::string shared_by_;
  std::string absent_reason_;
  std::array<std::string, series_count> unsupported_;  // NVML's reason per series, if any
  bool has_energy_counter_ = false;
  bool integrates_power_ = false;  // no energy counter, but power samples
  std::string energy_absent_reason_;
  std::optional<unsigned long long> first_millijoules_, last_millijoules_;
  // Trapezoidal integral of the power samples, where there is no energy counter.
  std::optional<double> previous_power_seconds_;
  double previous_watts_ = 0;
  double integrated_joules_ = 0;
  bool integrated_ = false;
};

}  // namespace dlscale::worker
