// `dlscale comm` options: the size parser, the sweep's sizes, the collectives and dtypes, and every
// refusal, without MPI.
#include <gtest/gtest.h>

#include "cli/comm_options.hpp"
#include "core/errors.hpp"

namespace dlscale::cli {
namespace {

CommOptions parsed(const std::vector<std::string>& arguments) {
  return parse_comm_options(arguments);
}

void expect_refused(const std::vector<std::string>& arguments, const std::string& named) {
  try {
    parse_comm_options(arguments);
    ADD_FAILURE() << "accepted, expected a refusal naming " << named;
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find(named), std::string::npos)
        << "'" << error.what() << "' does not name " << named;
  }
}

// The help text with each run of spaces and line breaks as one space, as Boost wraps it.
std::string help_as_one_line() {
  std::string text;
  for (const char c : comm_help_text()) {
    const bool space = c == ' ' || c == '\n';
    if (!(space && !text.empty() && text.back() == ' ')) text.push_back(space ? ' ' : c);
  }
  return text;
}

TEST(ByteSize, SuffixesArePowersOf1024InEitherCase) {
  EXPECT_EQ(parse_byte_size("8", "-b"), 8u);
  EXPECT_EQ(parse_byte_size("64K", "-b"), 64u * 1024);
  EXPECT_EQ(parse_byte_size("64k", "-b"), 64u * 1024);
  EXPECT_EQ(parse_byte_size("64M", "-b"), 67108864u);
  EXPECT_EQ(parse_byte_size("2G", "-b"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("0", "-b"), 0u);
}

TEST(ByteSize, AnythingElseIsRefusedNamingTheOption) {
  for (const char* text : {"", "M", "1.5M", "-3", "12X", "1MB", "1 M", "+8", "0x10"}) {
    try {
      parse_byte_size(text, "-e/--maxbytes");
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find("-e/--maxbytes"), std::string::npos) << error.what();
    }
  }
}

TEST(ByteSize, OverflowIsRefusedNotWrapped) {
  EXPECT_THROW(parse_byte_size("18446744073709551616", "-b"), UserError);  // 2^64
  EXPECT_THROW(parse_byte_size("17179869184G", "-b"), UserError);          // 2^34 GiB = 2^64
  EXPECT_EQ(parse_byte_size("17179869183G", "-b"), 17179869183ull << 30);
}

TEST(CommOptions, DefaultsSweepPowersOfTwoFrom8BytesTo64MiB) {
  const auto sizes = sweep_sizes_bytes(parsed({}));
  ASSERT_EQ(sizes.size(), 24u);
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), 64u * 1024 * 1024);
  for (std::size_t s = 1; s < sizes.size(); ++s) EXPECT_EQ(sizes[s], 2 * sizes[s - 1]);
}

TEST(CommOptions, StepsAddOrMultiply) {
  EXPECT_EQ(sweep_sizes_bytes(parsed({"-b", "10", "-e", "40", "-i", "6"})),
            (std::vector<std::uint64_t>{10, 16, 22, 28, 34, 40}));
  // 5, 15, 45 bytes: the next, 135, is past -e.
  EXPECT_EQ(sweep_sizes_bytes(parsed({"--minbytes=5", "--maxbytes=100", "--stepfactor=3"})),
            (std::vector<std::uint64_t>{5, 15, 45}));
}

TEST(CommOptions, OneSizeWhenMinimumEqualsMaximum) {
  EXPECT_EQ(sweep_sizes_bytes(parsed({"-b", "1M", "-e", "1M"})),
            (std::vector<std::uint64_t>{1048576}));
}

TEST(CommOptions, SweepStopsBeforeOverflowingNearTheLargestSize) {
  CommOptions options;
  options.minimum_bytes = 1ull << 62;
  options.maximum_bytes = ~0ull;
  options.step = 4;
  EXPECT_EQ(sweep_sizes_bytes(options).size(), 1u);
}

TEST(CommOptions, DefaultsSweepTheAllreduceInFloat) {
  const CommOptions options = parsed({});
  EXPECT_EQ(options.collectives, (std::vector<worker::Collective>{worker::Collective::allreduce}));
  EXPECT_EQ(options.dtypes, (std::vector<comm::GradientDtype>{comm::GradientDtype::fp32}));
}

TEST(CommOptions, CollectivesAndDtypesAreListsInTheOrderGiven) {
  const CommOptions options =
      parsed({"--collective", "alltoall,reduce_scatter,all_gather,broadcast,allreduce", "--dtype",
              "bf16,float"});
  EXPECT_EQ(options.collectives,
            (std::vector<worker::Collective>{
                worker::Collective::alltoall, worker::Collective::reduce_scatter,
                worker::Collective::all_gather, worker::Collective::broadcast,
                worker::Collective::allreduce}));
  EXPECT_EQ(options.dtypes, (std::vector<comm::GradientDtype>{comm::GradientDtype::bf16,
                                                              comm::GradientDtype::fp32}));
}

TEST(CommOptions, UnknownCollectivesAndDtypesAreRefusedNamingTheChoices) {
  expect_refused({"--collective", "allreduce,gather"}, "--collective: unknown collective 'gather'");
  expect_refused({"--collective", "gather"},
                 "(available: allreduce, reduce_scatter, all_gather, broadcast, alltoall)");
  expect_refused({"--dtype", "fp16"}, "--dtype: unknown dtype 'fp16' (available: float, bf16)");
  expect_refused({"--collective", "broadcast,broadcast"}, "broadcast is listed twice");
  expect_refused({"--dtype", ""}, "--dtype: unknown dtype ''");
}

TEST(CommOptions, TheSmallestSizeHoldsAnElementOfEveryDtype) {
  EXPECT_EQ(parsed({"-b", "2", "--dtype", "bf16"}).minimum_bytes, 2u);
  expect_refused({"-b", "2", "--dtype", "bf16,float"}, "at least 4 bytes (one float element)");
  expect_refused({"-i", "2", "--dtype", "float"}, "-i/--stepbytes must be at least 4 bytes");
}

TEST(CommOptions, CountsAndOutputAreRead) {
  const CommOptions options =
      parsed({"-n", "7", "-w", "0", "--comm", "mpi", "--out", "c.h5", "--overwrite"});
  EXPECT_EQ(options.measured_iterations, 7);
  EXPECT_EQ(options.warmup_iterations, 0);
  EXPECT_EQ(options.output_path, "c.h5");
  EXPECT_TRUE(options.overwrite);
  EXPECT_EQ(parsed({"-h"}).action, CommOptions::Action::show_help);
}

TEST(CommOptions, BadValuesAreRefusedNamingTheOption) {
  expect_refused({"-b", "2"}, "-b/--minbytes");
  expect_refused({"-b", "1M", "-e", "1K"}, "larger than -e/--maxbytes");
  expect_refused({"-f", "1"}, "-f/--stepfactor");
  expect_refused({"-f", "1.5"}, "stepfactor");
  expect_refused({"-i", "3"}, "-i/--stepbytes");
  expect_refused({"-f", "2", "-i", "8"}, "not both");
  expect_refused({"-b", "4", "-e", "1M", "-i", "4"}, "message sizes");
  expect_refused({"-n", "0"}, "-n/--iters");
  expect_refused({"-w", "-1"}, "warmup");
  expect_refused({"--out", ""}, "--out");
  expect_refused({"--bogus"}, "--bogus");
}

TEST(CommOptions, HelpTeachesWithAnExample) {
  const std::string help = help_as_one_line();
  for (const char* expected :
       {"--minbytes", "--stepfactor", "--stepbytes", "--iters", "--warmup", "--comm", "--out",
        "--overwrite", "Examples:", "rounded down", "--collective", "--dtype", "float or bf16"})
    EXPECT_NE(help.find(expected), std::string::npos) << "no '" << expected << "' in help";
}

// --help says, for each collective, what its size counts (nccl-tests' convention) and its factor.
TEST(CommOptions, HelpSaysWhatEachCollectivesSizeCounts) {
  const std::string help = help_as_one_line();
  for (const char* expected :
       {"reduce_scatter (size: the whole buffer each rank gives", "busbw = algbw * (n-1)/n",
        "all_gather (size: the whole buffer each rank receives", "allreduce (size: the message",
        "busbw = algbw * 2(n-1)/n", "broadcast (size: the message", "busbw = algbw * 1",
        "alltoall (size: the whole buffer each rank sends"})
    EXPECT_NE(help.find(expected), std::string::npos) << "no '" << expected << "' in help";
}

}  // namespace
}  // namespace dlscale::cli
