// The GPT family against docs/workloads.md: parameter counts (the closed form, and GPT-2's as
// Hugging Face counts them), FLOPs, spec parsing and its refusals, and the task's best loss.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.hpp"
#include "workloads/gpt_workload.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::workloads {
namespace {

// L (12 W^2 + 13 W) + 2 W + V W + S W, written out from the layers: per block two layer norms
// (2 W each), Q K V (3 W^2 + 3 W), the attention's output (W^2 + W), the MLP (4 W^2 + 4 W and
// 4 W^2 + W); the final layer norm; the token and position tables; the head adds nothing.
std::size_t closed_form_parameters(std::size_t l, std::size_t w, std::size_t s, std::size_t v) {
  const std::size_t block =
      2 * w + (3 * w * w + 3 * w) + (w * w + w) + 2 * w + (4 * w * w + 4 * w) + (4 * w * w + w);
  return l * block + 2 * w + v * w + s * w;
}

TEST(GptWorkloads, ParameterCountsFollowTheClosedForm) {
  EXPECT_EQ(make_workload("gpt-tiny")->parameter_count(), closed_form_parameters(2, 64, 32, 128));
  EXPECT_EQ(make_workload("gpt2-small")->parameter_count(),
            closed_form_parameters(12, 768, 1024, 50257));
  EXPECT_EQ(make_workload("gpt2-medium")->parameter_count(),
            closed_form_parameters(24, 1024, 1024, 50257));
}

TEST(GptWorkloads, ParameterCountsArePinned) {
  EXPECT_EQ(make_workload("gpt-tiny")->parameter_count(), 110'336u);
  // Hugging Face's GPT2LMHeadModel (tied head, biases) counts 124,439,808 and 354,823,168.
  EXPECT_EQ(make_workload("gpt2-small")->parameter_count(), 124'439'808u);
  EXPECT_EQ(make_workload("gpt2-medium")->parameter_count(), 354'823'168u);
}

TEST(GptWorkloads, LayerShapesAddUpToTheParameterCount) {
  for (const char* name : {"gpt-tiny", "gpt2-small", "gpt:3,12,4,7,19"}) {
    const auto workload = make_workload(name);
    std::size_t total = 0;
    for (const auto& shape : workload->layer_shapes()) total += shape.parameter_count;
    EXPECT_EQ(total, workload->parameter_count()) << name;
  }
}

TEST(GptWorkloads, FlopsAreSixPerMultiplyingParameterAndTwelveLwsPerToken) {
  const auto workload = make_workload("gpt2-small");
  // All parameters but the 1,024 x 768 position table.
  const double per_token = 6.0 * (124'439'808.0 - 1024 * 768) + 12.0 * 12 * 768 * 1024;
  EXPECT_DOUBLE_EQ(workload->training_flops_per_sample(), per_token * 1024);
  EXPECT_EQ(workload->tokens_per_sample(), 1024);
}

TEST(GptWorkloads, SpecIsParsed) {
  const auto workload = make_workload("gpt:3,12,4,7,19");
  EXPECT_EQ(workload->family(), "GPT");
  EXPECT_EQ(workload->name(), "gpt:3,12,4,7,19");
  EXPECT_EQ(workload->input_size(), 7u);
  EXPECT_EQ(workload->parameter_count(), closed_form_parameters(3, 12, 7, 19));
  const auto& gpt = dynamic_cast<const GptWorkload&>(*workload);
  EXPECT_EQ(gpt.shape().heads, 4);
  EXPECT_TRUE(workload->layers_share_parameters());
}

TEST(GptWorkloads, MalformedSpecsAreUserErrors) {
  for (const char* spec :
       {"gpt:", "gpt:12,768,12,1024", "gpt:12,768,12,1024,50257,1", "gpt:12,768,5,1024,50257",
        "gpt:0,768,12,1024,50257", "gpt:12,768,12,1024,1", "gpt:12,x,12,1024,50257",
        "gpt:100000,100000,1,1024,50257", "gpt:1,64,1,1048576,50257"})
    EXPECT_THROW(make_workload(spec), UserError) << spec;
}

TEST(GptWorkloads, WidthNotDividedByTheHeadsIsNamed) {
  try {
    make_workload("gpt:12,768,5,1024,50257");
    FAIL() << "accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("not a multiple of 5 heads"), std::string::npos)
        << error.what();
  }
}

TEST(GptWorkloads, BestLossIsTheChainsEntropyAndBelowItsDistinctSuccessorsBound) {
  const double distinct = -(0.5 * std::log(0.5) + 0.25 * std::log(0.25) + 0.15 * std::log(0.15) +
                            0.1 * std::log(0.1));  // 1.2080 nats
  const double best = make_workload("gpt2-small")->best_loss(1);
  // Merged successors (two choices reaching one token) only lower it, and rarely at V = 50,257.
  EXPECT_LE(best, distinct);
  EXPECT_GT(best, distinct - 0.01);
  // A 5-token chain merges often: far below.
  EXPECT_LT(make_workload("gpt:1,8,2,16,5")->best_loss(1), distinct - 0.05);
}

}  // namespace
}  // namespace dlscale::workloads
