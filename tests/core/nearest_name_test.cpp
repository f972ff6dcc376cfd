// nearest_name(): the suggestion a one-line error offers for a mistyped model or option.
#include "core/nearest_name.hpp"

#include <gtest/gtest.h>

namespace dlscale {
namespace {

const std::vector<std::string> models = {"fcn-s",     "fcn-r",        "alexnet-s",
                                         "alexnet-r", "resnet-50",    "resnet-56",
                                         "vgg-16",    "mobilenet-v2", "lstm-32"};
const std::vector<std::string> options = {"--model",  "--batch",     "--iters",
                                          "--warmup", "--ranks",     "--threads",
                                          "--out",    "--overwrite", "--repeat"};

TEST(NearestName, FindsTheModelBehindADroppedHyphenOrWrongLetter) {
  EXPECT_EQ(nearest_name("resnet56", models), "resnet-56");
  EXPECT_EQ(nearest_name("renset-56", models), "resnet-56");
  EXPECT_EQ(nearest_name("mobilenetv2", models), "mobilenet-v2");
  EXPECT_EQ(nearest_name("vgg16", models), "vgg-16");
}

TEST(NearestName, FindsTheOptionBehindASwapOrTheWrittenOutWord) {
  EXPECT_EQ(nearest_name("--bacth", options), "--batch");
  EXPECT_EQ(nearest_name("--iterations", options), "--iters");
  EXPECT_EQ(nearest_name("--thread", options), "--threads");
  EXPECT_EQ(nearest_name("--output", options), "--out");
}

TEST(NearestName, SuggestsNothingForAnUnrelatedWord) {
  EXPECT_EQ(nearest_name("transformer", models), std::nullopt);
  EXPECT_EQ(nearest_name("--frobnicate", options), std::nullopt);
  EXPECT_EQ(nearest_name("", options), std::nullopt);
  EXPECT_EQ(nearest_name(std::string(100000, 'x'), options), std::nullopt);
}

TEST(NearestName, DidYouMeanIsEmptyWithoutASuggestion) {
  EXPECT_EQ(did_you_mean("resnet56", models), " (did you mean 'resnet-56'?)");
  EXPECT_EQ(did_you_mean("transformer", models), "");
}

}  // namespace
}  // namespace dlscale
