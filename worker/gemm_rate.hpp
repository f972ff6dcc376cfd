// The GEMM rate of this rank's device, measured in the run itself: the yardstick a training
// step's GFLOP/s is held against ("how close to what the hardware allows").
#pragma once

#include "kernels/device.hpp"

namespace dlscale::worker {

// GFLOP/s of the best of a few square float GEMMs of order `order`, timed with device events.
double measure_gemm_gflops(kernels::Device& device, int order);

}  // namespace dlscale::worker
