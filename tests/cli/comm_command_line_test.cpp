// `dlscale comm` as a user runs it, under mpirun with 2 ranks: a sweep prints the nccl-tests-like
// table and writes the /comm group; every bad option, size or output path gives one error line
// naming it and status 2 on every rank within seconds; an existing file is never clobbered.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "results/comm_reader.hpp"
#include "tests/cli/dlscale_under_mpirun.hpp"

namespace dlscale::testing {
namespace {

namespace fs = std::filesystem;

class CommCommandLine : public DlscaleUnderMpirun {};

// The table rows: the lines that do not start with '#'.
std::vector<std::string> table_rows(const std::string& text) {
  std::vector<std::string> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] != '#' && line.rfind("results", 0) != 0) rows.push_back(line);
  return rows;
}

TEST_F(CommCommandLine, SweepPrintsTheTableAndWritesTheCommGroup) {
  const Outcome outcome = run_dlscale("comm -b 8 -e 1M -f 4 -n 5 -w 1 --out sweep.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  EXPECT_TRUE(outcome.error_lines.empty());

  // 8, 32, 128, ..., 512 KiB: the next size, 2 MiB, is past -e.
  const std::vector<std::uint64_t> expected_bytes = {8,    32,    128,    512,   2048,
                                                     8192, 32768, 131072, 524288};
  const auto rows = table_rows(outcome.stdout_text);
  ASSERT_EQ(rows.size(), expected_bytes.size()) << outcome.stdout_text;
  for (std::size_t s = 0; s < rows.size(); ++s) {
    std::istringstream row(rows[s]);
    std::uint64_t bytes = 0, count = 0, wrong = 1;
    std::string type, operation;
    double time_p50 = 0, time_p95 = 0, algbw_p50 = 0, algbw_p95 = 0, busbw_p50 = 0, busbw_p95 = 0;
    row >> bytes >> count >> type >> operation >> time_p50 >> time_p95 >> algbw_p50 >> algbw_p95 >>
        busbw_p50 >> busbw_p95 >> wrong;
    ASSERT_TRUE(row) << "not a table row: " << rows[s];
    EXPECT_EQ(bytes, expected_bytes[s]) << rows[s];
    EXPECT_EQ(count, expected_bytes[s] / 4) << rows[s];
    EXPECT_EQ(type + " " + operation, "float sum") << rows[s];
    EXPECT_GE(time_p95, time_p50) << rows[s];
    EXPECT_EQ(busbw_p50, algbw_p50) << "2 ranks: busbw = algbw * 2(2-1)/2; " << rows[s];
    EXPECT_EQ(wrong, 0u) << rows[s];
  }
  for (const char* expected : {"busbw p50", "wrong elements: 0", "alpha =", "beta ="})
    EXPECT_NE(outcome.stdout_text.find(expected), std::string::npos)
        << "no '" << expected << "' in:\n"
        << outcome.stdout_text;

  const auto record = results::read_comm(directory_ / "sweep.h5");
  EXPECT_EQ(record.ranks, 2);
  EXPECT_EQ(record.backend, "mpi");
  EXPECT_EQ(record.measured_iterations, 5);
  EXPECT_EQ(record.warmup_iterations, 1);
  EXPECT_EQ(record.command_line, "dlscale comm -b 8 -e 1M -f 4 -n 5 -w 1 --out sweep.h5");
  ASSERT_EQ(record.sizes.size(), expected_bytes.size());
  EXPECT_EQ(record.seconds.size(), expected_bytes.size() * 5 * 2);
  for (std::size_t s = 0; s < expected_bytes.size(); ++s) {
    EXPECT_EQ(record.sizes[s].bytes, expected_bytes[s]);
    EXPECT_EQ(record.sizes[s].wrong_elements, 0u);
    EXPECT_GT(record.sizes[s].seconds_p50, 0);
    EXPECT_GE(record.sizes[s].seconds_p95, record.sizes[s].seconds_p50);
  }
  EXPECT_TRUE(std::isfinite(record.fit.alpha_seconds));
  EXPECT_GT(record.fit.beta_seconds_per_byte, 0);
  for (const auto& entry : fs::directory_iterator(directory_))
    EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos)
        << "left behind: " << entry.path();
}

TEST_F(CommCommandLine, HelpTeachesWithAnExample) {
  const Outcome outcome = run_dlscale("comm --help");
  EXPECT_EQ(outcome.rank_exit_codes[0], 0);
  for (const char* expected : {"Usage: mpirun -np N dlscale comm", "--minbytes", "-b",
                               "mpirun -np 2 dlscale comm -b 8 -e 64M -f 2", "rounded down"})
    EXPECT_NE(outcome.stdout_text.find(expected), std::string::npos)
        << "no '" << expected << "' in:\n"
        << outcome.stdout_text;
}

TEST_F(CommCommandLine, MalformedSizesAreRefused) {
  expect_refused("comm -b 12X", "12X");
  expect_refused("comm -e 1.5M", "1.5M");
  expect_refused("comm --maxbytes=", "--maxbytes");
  expect_refused("comm -b 2", "-b/--minbytes");
}

TEST_F(CommCommandLine, MinimumAboveMaximumIsRefused) {
  expect_refused("comm -b 1M -e 64K", "-b/--minbytes (1048576 bytes) is larger than -e/--maxbytes");
}

TEST_F(CommCommandLine, StepsThatCannotGrowAreRefused) {
  expect_refused("comm -f 1", "-f/--stepfactor");
  expect_refused("comm -i 2", "-i/--stepbytes");
  expect_refused("comm -f 2 -i 1K", "not both");
  expect_refused("comm -b 4 -e 1M -i 4", "message sizes");
}

TEST_F(CommCommandLine, BadCountsAndUnknownOptionsAreRefused) {
  expect_refused("comm -n 0", "-n/--iters");
  expect_refused("comm --frobnicate", "--frobnicate");
}

TEST_F(CommCommandLine, UnknownBackendIsRefused) {
  expect_refused("comm --comm carrier-pigeon", "carrier-pigeon");
}

TEST_F(CommCommandLine, SweepTooLargeForMemoryIsRefusedAtOnce) {
  expect_refused("comm -b 8 -e 100000G", "-e/--maxbytes");
}

TEST_F(CommCommandLine, UnwritableOutputPathIsRefused) {
  expect_refused("comm -e 64 --out /nonexistent-dir/c.h5", "/nonexistent-dir");
}

TEST_F(CommCommandLine, ExistingOutputFileIsRefusedAndKept) {
  std::ofstream(directory_ / "taken.h5") << "earlier results";
  expect_refused("comm -e 64 --out taken.h5", "--overwrite");
  EXPECT_EQ(read_text_file(directory_ / "taken.h5"), "earlier results");
}

TEST_F(CommCommandLine, OverwriteReplacesAnEarlierFile) {
  std::ofstream(directory_ / "again.h5") << "earlier results";
  const Outcome outcome = run_dlscale("comm -e 64 -n 2 --out again.h5 --overwrite");
  EXPECT_EQ(outcome.rank_exit_codes[0], 0);
  EXPECT_EQ(results::read_comm(directory_ / "again.h5").sizes.size(), 4u);  // 8, 16, 32, 64
}

}  // namespace
}  // namespace dlscale::testing
