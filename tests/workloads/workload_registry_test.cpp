// Workload shapes, sizes, spec parsing and synthetic data, against docs/workloads.md.
#include <gtest/gtest.h>

#include <set>

#include "core/errors.hpp"
#include "workloads/fcn_workload.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::workloads {
namespace {

TEST(Workloads, ParameterCountsMatchTheReferenceTable) {
  EXPECT_EQ(make_workload("fcn-s")->parameter_count(), 122'194'048u);
  EXPECT_EQ(make_workload("fcn-r")->parameter_count(), 14'205'962u);
  EXPECT_EQ(make_workload("alexnet-r")->parameter_count(), 85'098u);
  EXPECT_EQ(make_workload("alexnet-s")->parameter_count(), 61'100'840u);
  EXPECT_EQ(make_workload("vgg-16")->parameter_count(), 138'357'544u);
  EXPECT_EQ(make_workload("resnet-56")->parameter_count(), 855'770u);
  EXPECT_EQ(make_workload("resnet-50")->parameter_count(), 25'557'032u);
  EXPECT_EQ(make_workload("mobilenet-v2")->parameter_count(), 3'504'872u);
  EXPECT_EQ(make_workload("lstm-32")->parameter_count(), 14'448'400u);  // one bias per gate
  EXPECT_EQ(make_workload("lstm-64")->parameter_count(), 14'448'400u);
}

TEST(Workloads, LstmFlopsFollowTheReferenceFormula) {
  // Per step: 6 * 4h * (x + h) per LSTM layer, 6 * h * vocabulary for the output layer.
  const double expected = 32 * (2 * 6.0 * 4 * 512 * (512 + 512) + 6.0 * 512 * 10000);
  EXPECT_DOUBLE_EQ(make_workload("lstm-32")->training_flops_per_sample(), expected);
}

TEST(Workloads, UserLstmSpecIsParsed) {
  const auto workload = make_workload("lstm:8,16,3,50");
  EXPECT_EQ(workload->family(), "RNN");
  EXPECT_EQ(workload->input_size(), 8u);
  EXPECT_EQ(workload->parameter_count(), 50u * 16 + 3 * (4 * 16 * 32 + 4 * 16) + 16 * 50 + 50);
}

TEST(Workloads, MalformedLstmSpecsAreUserErrors) {
  for (const char* spec : {"lstm:", "lstm:32,512,2", "lstm:32,512,2,10000,7", "lstm:32,0,2,100",
                           "lstm:32,512,x,100", "lstm:32,512,2,1"})
    EXPECT_THROW(make_workload(spec), UserError) << spec;
}

TEST(Workloads, ConvolutionFlopsFollowTheReferenceFormula) {
  // alexnet-r: 6 * Hout * Wout * Cout * Cin * K * K per convolution, 6 * in * out for the fc.
  const double expected =
      6.0 * (32 * 32 * 32 * 3 * 25 + 15 * 15 * 32 * 32 * 25 + 7 * 7 * 64 * 32 * 25 + 576 * 10);
  EXPECT_DOUBLE_EQ(make_workload("alexnet-r")->training_flops_per_sample(), expected);
}

TEST(Workloads, ReferenceCpuBatchSizes) {
  EXPECT_EQ(make_workload("fcn-s")->default_batch(), 64);
  EXPECT_EQ(make_workload("fcn-r")->default_batch(), 1024);
  EXPECT_EQ(make_workload("alexnet-r")->default_batch(), 1024);
  EXPECT_EQ(make_workload("alexnet-s")->default_batch(), 16);
  EXPECT_EQ(make_workload("vgg-16")->default_batch(), 16);
  EXPECT_EQ(make_workload("resnet-56")->default_batch(), 128);
  EXPECT_EQ(make_workload("resnet-50")->default_batch(), 16);
  EXPECT_EQ(make_workload("mobilenet-v2")->default_batch(), 16);
  EXPECT_EQ(make_workload("lstm-32")->default_batch(), 128);
}

TEST(SyntheticData, MarkovLabelsAreTheNextInputToken) {
  const auto workload = make_workload("lstm:6,8,1,30");
  const auto batch = workload->make_batch(4, 9, 0, 0);
  ASSERT_EQ(batch.inputs.size(), 24u);
  ASSERT_EQ(batch.labels.size(), 24u);
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t + 1 < 6; ++t)
      EXPECT_EQ(batch.labels[b * 6 + t], int(batch.inputs[b * 6 + t + 1]));
}

TEST(Workloads, TrainingFlopsAreSixPerWeightPerSample) {
  const auto workload = make_workload("fcn:10,20,3");
  EXPECT_DOUBLE_EQ(workload->training_flops_per_sample(), 6.0 * (10 * 20 + 20 * 3));
  EXPECT_EQ(workload->parameter_count(), 10u * 20 + 20 + 20 * 3 + 3);
}

TEST(Workloads, UserSpecBuildsSigmoidBetweenDenseLayers) {
  const auto workload = parse_fcn_spec("8,4,2");
  const auto layers = workload->make_layers<float>();
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0]->kind(), "dense");
  EXPECT_EQ(layers[1]->kind(), "sigmoid");
  EXPECT_EQ(layers[2]->kind(), "dense");
}

TEST(Workloads, UnknownModelIsAUserError) { EXPECT_THROW(make_workload("nonsense"), UserError); }

TEST(Workloads, MalformedSpecsAreUserErrors) {
  for (const char* spec : {"fcn:", "fcn:784", "fcn:784,,10", "fcn:784,abc,10", "fcn:784,10,",
                           "fcn:-5,10", "fcn:0,10", "fcn:784,1", "fcn:784,99999999999,10"})
    EXPECT_THROW(make_workload(spec), UserError) << spec;
}

TEST(SyntheticData, IsDeterministicAndDiffersByRank) {
  const auto workload = make_workload("fcn:16,8,4");
  const auto first = workload->make_batch(32, 5, 0, 0);
  EXPECT_EQ(first.inputs, workload->make_batch(32, 5, 0, 0).inputs);
  EXPECT_EQ(first.labels, workload->make_batch(32, 5, 0, 0).labels);
  EXPECT_NE(first.inputs, workload->make_batch(32, 5, 1, 0).inputs);
  EXPECT_NE(first.inputs, workload->make_batch(32, 5, 0, 1).inputs);
}

// A batch's samples may be made by several threads (the set-up passes the rank's CPUs): the same
// values on one thread as on several, for an image and an FCN workload, over a batch that does
// not divide among them evenly.
TEST(SyntheticData, IsTheSameOnOneThreadAsOnSeveral) {
  for (const char* spec : {"fcn:3000,8,10", "alexnet-r"}) {
    const auto workload = make_workload(spec);
    const auto alone = workload->make_batch(37, 5, 2, 3, 1);
    for (const int threads : {2, 3, 8}) {
      const auto shared = workload->make_batch(37, 5, 2, 3, threads);
      EXPECT_EQ(shared.inputs, alone.inputs) << spec << ", " << threads << " threads";
      EXPECT_EQ(shared.labels, alone.labels) << spec << ", " << threads << " threads";
    }
  }
}

TEST(SyntheticData, LabelsCoverSeveralClassesInRange) {
  const auto workload = make_workload("fcn:16,8,4");
  const auto batch = workload->make_batch(256, 5, 0, 0);
  std::set<int> classes(batch.labels.begin(), batch.labels.end());
  EXPECT_GE(classes.size(), 3u);
  EXPECT_GE(*classes.begin(), 0);
  EXPECT_LT(*classes.rbegin(), 4);
}

}  // namespace
}  // namespace dlscale::workloads
