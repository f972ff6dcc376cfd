// `dlscale comm` options: the size parser, the sweep's sizes (rounded down to whole floats) and
// every refusal, without MPI.
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
  const auto counts = sweep_element_counts(parsed({}));
  ASSERT_EQ(counts.size(), 24u);
  EXPECT_EQ(counts.front(), 2u);                // 8 bytes
  EXPECT_EQ(counts.back(), 16u * 1024 * 1024);  // 64 MiB
  for (std::size_t s = 1; s < counts.size(); ++s) EXPECT_EQ(counts[s], 2 * counts[s - 1]);
}

TEST(CommOptions, SizesAreRoundedDownToWholeFloats) {
  // 10, 16, 22, 28, 34, 40 bytes.
  EXPECT_EQ(sweep_element_counts(parsed({"-b", "10", "-e", "40", "-i", "6"})),
            (std::vector<std::uint64_t>{2, 4, 5, 7, 8, 10}));
  // 5, 15, 45 bytes: the next, 135, is past -e.
  EXPECT_EQ(sweep_element_counts(parsed({"--minbytes=5", "--maxbytes=100", "--stepfactor=3"})),
            (std::vector<std::uint64_t>{1, 3, 11}));
}

TEST(CommOptions, OneSizeWhenMinimumEqualsMaximum) {
  EXPECT_EQ(sweep_element_counts(parsed({"-b", "1M", "-e", "1M"})),
            (std::vector<std::uint64_t>{262144}));
}

TEST(CommOptions, SweepStopsBeforeOverflowingNearTheLargestSize) {
  CommOptions options;
  options.minimum_bytes = 1ull << 62;
  options.maximum_bytes = ~0ull;
  options.step = 4;
  EXPECT_EQ(sweep_element_counts(options).size(), 1u);
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
  const std::string help = comm_help_text();
  for (const char* expected : {"--minbytes", "--stepfactor", "--stepbytes", "--iters", "--warmup",
                               "--comm", "--out", "--overwrite", "Examples:", "rounded down"})
    EXPECT_NE(help.find(expected), std::string::npos) << "no '" << expected << "' in help";
}

}  // namespace
}  // namespace dlscale::cli
