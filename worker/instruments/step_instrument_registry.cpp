// make_step_instruments: which instruments a rank runs. The noise meter always (on one rank it
// records why its series are absent); held-out evaluation where it was asked for.
#include <memory>

#include "worker/instruments/gradient_noise_meter.hpp"
#include "worker/instruments/held_out_evaluation.hpp"
#include "worker/instruments/step_instrument.hpp"

namespace dlscale::worker {

std::vector<std::unique_ptr<StepInstrument>> make_step_instruments(
    const StepInstrumentSettings& settings) {
  std::vector<std::unique_ptr<StepInstrument>> instruments;
  instruments.push_back(std::make_unique<GradientNoiseMeter>(settings.device, settings.communicator,
                                                             settings.warmup_iterations,
                                                             settings.update_sees_every_gradient));
  if (settings.evaluate && settings.evaluate_every > 0)
    instruments.push_back(
        std::make_unique<HeldOutEvaluation>(settings.evaluate, settings.evaluate_every));
  return instruments;
}

}  // namespace dlscale::worker
