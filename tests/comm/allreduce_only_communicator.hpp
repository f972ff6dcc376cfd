// A base for test communicators that stand in for a backend where only the blocking allreduce is
// used (the allreduce sweep): the out-of-place sum is the in-place one on a copy and a started sum
// is the blocking one, so a test communicator's allreduce_sum serves every form, and the other
// collectives fail loudly if a test ever reaches them.
#pragma once

#include <algorithm>
#include <stdexcept>

#include "comm/gradient_communicator.hpp"

namespace dlscale::comm {

class AllreduceOnlyCommunicator : public GradientCommunicator {
 public:
  void allreduce_sum_out_of_place(std::span<const float> input, std::span<float> sum) override {
    std::copy(input.begin(), input.end(), sum.begin());
    allreduce_sum(sum);
  }
  void start_allreduce_sum(std::span<float> values, const kernels::DeviceEvent&) override {
    allreduce_sum(values);
  }
  void wait_all() override {}
  double last_exchange_seconds() override { return 0; }
  bool can_be_captured() const override { return false; }
  void reduce_scatter_sum(std::span<const float>, std::span<float>) override { unused(); }
  void all_gather(std::span<const float>, std::span<float>) override { unused(); }
  void broadcast(std::span<const float>, std::span<float>, int) override { unused(); }
  void alltoall(std::span<const float>, std::span<float>) override { unused(); }
  void start_reduce_scatter_sum(std::span<const float>, std::span<float>,
                                const kernels::DeviceEvent&) override {
    unused();
  }
  void start_all_gather(std::span<const float>, std::span<float>,
                        const kernels::DeviceEvent&) override {
    unused();
  }
  void start_broadcast(std::span<const float>, std::span<float>, int,
                       const kernels::DeviceEvent&) override {
    unused();
  }
  void start_alltoall(std::span<const float>, std::span<float>,
                      const kernels::DeviceEvent&) override {
    unused();
  }

 private:
  [[noreturn]] static void unused() {
    throw std::logic_error("this test communicator serves the allreduce only");
  }
};

}  // namespace dlscale::comm
