// What `dlscale predict` prints: the table for people (header with the network, the node-sharing
// curve and every stand-in, then one row per rank count with the measurement beside it where
// there is one) and the same rows as JSON for tools. It only formats.
#pragma once

#include <string>
#include <vector>

#include "analysis/scaling_prediction.hpp"

namespace dlscale::printers {

std::string format_prediction_table(const analysis::ScalingPrediction& prediction,
                                    const analysis::NetworkModel& network,
                                    const std::string& algorithm);

// {"model", "algorithm", "alpha_seconds", "beta_seconds_per_byte" (the inter-node link's
// largest-message piece), "network", "node_sharing", "notes", "predictions": [...]}; NaN as null.
std::string format_prediction_json(const analysis::ScalingPrediction& prediction,
                                   const analysis::NetworkModel& network,
                                   const std::string& algorithm);

// The strategies of one file side by side (each predicted from its own runs, same precision):
// their predicted iteration times at each rank count, the fastest marked, and where each one
// overtakes the first strategy or stops being faster than it.
std::string format_strategy_comparison(const std::vector<analysis::ScalingPrediction>& strategies);

}  // namespace dlscale::printers
