// Held-out evaluation after every `evaluate_every` iterations, stamped with the samples and the
// training time it was made at.
#include "worker/instruments/held_out_evaluation.hpp"

#include <utility>

#include "worker/training_loop.hpp"

namespace dlscale::worker {

HeldOutEvaluation::HeldOutEvaluation(Evaluator evaluate, int evaluate_every)
    : evaluate_(std::move(evaluate)), evaluate_every_(evaluate_every) {}

bool HeldOutEvaluation::after_iteration(const TrainingProgress& progress, IterationReport& report) {
  if ((progress.iteration + 1) % evaluate_every_ != 0) return false;
  results::Evaluation evaluation = evaluate_();
  evaluation.iteration = progress.iteration;
  evaluation.samples = progress.samples;
  evaluation.training_seconds = progress.training_seconds;
  evaluations_.push_back(evaluation);
  report.evaluation = &evaluations_.back();  // valid until the next iteration's evaluation
  return true;
}

void HeldOutEvaluation::stop(int /*completed*/, RankMeasurements& measured) {
  measured.evaluations = std::move(evaluations_);
}

}  // namespace dlscale::worker
