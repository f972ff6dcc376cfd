// The GEMM rate of this rank's device, measured in the run itself: the yardstick a training
// step's GFLOP/s is held against ("how close to what the hardware allows").
#pragma once

#include "kernels/device.hpp"

namespace dlscale::worker {

// GFLOP/s of the fastest of square float GEMMs of order `order`, each timed with device events,
// repeated until `least_seconds` have passed on the wall clock (and at least 3 times): on a
// shared machine some of them fall outside another job's burst, and the fastest is the rate the
// device gives when it is left alone.
double measure_gemm_gflops(kernels::Device& device, int order, double least_seconds);

}  // namespace dlscale::worker
