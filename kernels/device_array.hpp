// An owning, move-only array in a Device's memory.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "kernels/device.hpp"

namespace dlscale::kernels {

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Device& device, std::size_t count)
      : device_(&device),
        data_(static_cast<T*>(device.allocate(count * sizeof(T)))),
        count_(count) {}
  ~DeviceArray() {
    if (data_ != nullptr) device_->deallocate(data_);
  }
  DeviceArray(DeviceArray&& other) noexcept { swap(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    DeviceArray moved(std::move(other));
    swap(moved);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::span<T> span() { return {data_, count_}; }
  std::span<const T> span() const { return {data_, count_}; }

  void copy_from_host(std::span<const T> host) {
    device_->copy_to_device(data_, host.data(), host.size() * sizeof(T));
  }
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    device_->copy_to_host(host.data(), data_, count_ * sizeof(T));
    return host;
  }

 private:
  void swap(DeviceArray& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }

  Device* device_ = nullptr;
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace dlscale::kernels
