// Held-out evaluation as a step instrument: after every `evaluate_every` iterations the model is
// evaluated (worker/held_out_set.hpp), off the training clock, and the observer sees the result
// in that iteration's report. Reads nothing inside the step.
#pragma once

#include <vector>

#include "results/run_record.hpp"
#include "worker/instruments/step_instrument.hpp"

namespace dlscale::worker {

class HeldOutEvaluation : public StepInstrument {
 public:
  HeldOutEvaluation(Evaluator evaluate, int evaluate_every);

  // Evaluates, stamps the evaluation with the progress, and points the report at it.
  bool after_iteration(const TrainingProgress& progress, IterationReport& report) override;
  // Moves the evaluations, in order, into measured.evaluations.
  void stop(int completed, RankMeasurements& measured) override;

 private:
  Evaluator evaluate_;
  const int evaluate_every_;
  std::vector<results::Evaluation> evaluations_;
};

}  // namespace dlscale::worker
