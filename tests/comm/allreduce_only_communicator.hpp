// A base for test communicators that stand in for a backend where only the allreduce is used
// (the allreduce sweep): the sharded collectives fail loudly if a test ever reaches them.
#pragma once

#include <stdexcept>

#include "comm/gradient_communicator.hpp"

namespace dlscale::comm {

class AllreduceOnlyCommunicator : public GradientCommunicator {
 public:
  void reduce_scatter_sum(std::span<const float>, std::span<float>) override { unused(); }
  void all_gather(std::span<const float>, std::span<float>) override { unused(); }
  void start_reduce_scatter_sum(std::span<const float>, std::span<float>,
                                const kernels::DeviceEvent&) override {
    unused();
  }
  void start_all_gather(std::span<const float>, std::span<float>,
                        const kernels::DeviceEvent&) override {
    unused();
  }

 private:
  [[noreturn]] static void unused() {
    throw std::logic_error("this test communicator serves the allreduce only");
  }
};

}  // namespace dlscale::comm
