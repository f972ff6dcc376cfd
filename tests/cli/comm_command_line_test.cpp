// `dlscale comm` as a user runs it, under mpirun with 2 ranks: a sweep prints nccl-tests-like
// tables, one per collective and dtype with out-of-place and in-place columns and no wrong
// element, and writes the /comm group; every bad option, collective, dtype, size or output path
// gives one error line naming it and status 2 on every rank within seconds; an existing file is
// never clobbered.
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

// The columns of one placement of a row: times (us), bandwidths (GB/s) and the wrong elements.
struct Placement {
  double p50 = 0, p95 = 0, mean = 0, min = 0, max = 0, algbw = 0, busbw = 0;
  std::uint64_t wrong = 1;
};

struct Row {
  std::uint64_t bytes = 0, count = 0;
  std::string type, redop;
  int root = 0;
  Placement out_of_place, in_place;
};

std::istream& operator>>(std::istream& in, Placement& p) {
  return in >> p.p50 >> p.p95 >> p.mean >> p.min >> p.max >> p.algbw >> p.busbw >> p.wrong;
}

// Each table's rows (the lines that do not start with '#'), by its header line
// "# COLLECTIVE in DTYPE: ...", in the order printed.
std::vector<std::pair<std::string, std::vector<Row>>> tables(const std::string& text) {
  std::vector<std::pair<std::string, std::vector<Row>>> found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto in = line.find(" in ");
    if (line.rfind("# ", 0) == 0 && in != std::string::npos &&
        line.find(": busbw") != std::string::npos) {
      found.emplace_back(line.substr(2, line.find(':') - 2), std::vector<Row>{});
      continue;
    }
    if (line.empty() || line[0] == '#' || line.rfind("results", 0) == 0) continue;
    std::istringstream fields(line);
    Row row;
    fields >> row.bytes >> row.count >> row.type >> row.redop >> row.root >> row.out_of_place >>
        row.in_place;
    EXPECT_TRUE(fields) << "not a table row: " << line;
    if (!found.empty()) found.back().second.push_back(row);
  }
  return found;
}

TEST_F(CommCommandLine, SweepPrintsTheTableAndWritesTheCommGroup) {
  const Outcome outcome = run_dlscale("comm -b 8 -e 1M -f 4 -n 5 -w 1 --out sweep.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  EXPECT_TRUE(outcome.error_lines.empty());

  // 8, 32, 128, ..., 512 KiB: the next size, 2 MiB, is past -e.
  const std::vector<std::uint64_t> expected_bytes = {8,    32,    128,    512,   2048,
                                                     8192, 32768, 131072, 524288};
  const auto printed = tables(outcome.stdout_text);
  ASSERT_EQ(printed.size(), 1u) << outcome.stdout_text;
  EXPECT_EQ(printed[0].first, "allreduce in float");
  const auto& rows = printed[0].second;
  ASSERT_EQ(rows.size(), expected_bytes.size()) << outcome.stdout_text;
  for (std::size_t s = 0; s < rows.size(); ++s) {
    const Row& row = rows[s];
    EXPECT_EQ(row.bytes, expected_bytes[s]);
    EXPECT_EQ(row.count, expected_bytes[s] / 4);
    EXPECT_EQ(row.type + " " + row.redop, "float sum");
    EXPECT_EQ(row.root, -1);
    for (const Placement* placement : {&row.out_of_place, &row.in_place}) {
      EXPECT_GE(placement->p95, placement->p50) << row.bytes;
      EXPECT_GE(placement->max, placement->p95) << row.bytes;
      EXPECT_LE(placement->min, placement->p50) << row.bytes;
      EXPECT_LE(placement->min, placement->mean) << row.bytes;
      EXPECT_GE(placement->max, placement->mean) << row.bytes;
      EXPECT_EQ(placement->busbw, placement->algbw) << "2 ranks: busbw = algbw * 2(2-1)/2";
      EXPECT_EQ(placement->wrong, 0u) << row.bytes;
    }
  }
  for (const char* expected : {"out-of-place", "in-place", "wrong elements: 0", "Avg bus bandwidth",
                               "alpha-beta fit", "beta "})
    EXPECT_NE(outcome.stdout_text.find(expected), std::string::npos)
        << "no '" << expected << "' in:\n"
        << outcome.stdout_text;

  const auto record = results::read_comm(directory_ / "sweep.h5");
  EXPECT_EQ(record.ranks, 2);
  EXPECT_EQ(record.backend, "mpi");
  EXPECT_EQ(record.measured_iterations, 5);
  EXPECT_EQ(record.warmup_iterations, 1);
  EXPECT_EQ(record.command_line, "dlscale comm -b 8 -e 1M -f 4 -n 5 -w 1 --out sweep.h5");
  ASSERT_EQ(record.tables.size(), 1u);
  const auto& table = record.tables[0];
  EXPECT_EQ(table.collective, "allreduce");
  EXPECT_EQ(table.dtype, "float");
  ASSERT_EQ(table.times.sizes.size(), expected_bytes.size());
  ASSERT_EQ(table.times.out_of_place_sizes.size(), expected_bytes.size());
  EXPECT_EQ(table.times.seconds.size(), expected_bytes.size() * 5 * 2);
  for (std::size_t s = 0; s < expected_bytes.size(); ++s) {
    EXPECT_EQ(table.times.sizes[s].bytes, expected_bytes[s]);
    EXPECT_EQ(table.times.sizes[s].wrong_elements, 0u);
    EXPECT_EQ(table.times.out_of_place_sizes[s].wrong_elements, 0u);
    EXPECT_GT(table.times.sizes[s].seconds_p50, 0);
    EXPECT_GE(table.times.sizes[s].seconds_p95, table.times.sizes[s].seconds_p50);
  }
  EXPECT_GT(table.times.fit.beta_seconds_per_byte, 0);
  EXPECT_GT(table.average_busbw_gbps, 0);
  for (const auto& entry : fs::directory_iterator(directory_))
    EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos)
        << "left behind: " << entry.path();
}

// The acceptance of issue 34, item 5: ZeRO's two collectives in float and bf16, a table each,
// nccl-tests' sizes, and not one wrong element out of place or in place.
TEST_F(CommCommandLine, ShardedCollectivesInTwoDtypesPrintATableEachWithNoWrongElement) {
  const Outcome outcome = run_dlscale(
      "comm --collective reduce_scatter,all_gather --dtype float,bf16 -b 8 -e 64K -f 4 -n 3 -w 1 "
      "--out sharded.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  const auto printed = tables(outcome.stdout_text);
  ASSERT_EQ(printed.size(), 4u) << outcome.stdout_text;
  const std::vector<std::string> names = {"reduce_scatter in float", "reduce_scatter in bf16",
                                          "all_gather in float", "all_gather in bf16"};
  for (std::size_t t = 0; t < printed.size(); ++t) {
    const auto& [name, rows] = printed[t];
    EXPECT_EQ(name, names[t]);
    // 8, 32, ..., 32768 bytes: each a whole element per rank on 2 ranks, in either dtype.
    ASSERT_EQ(rows.size(), 7u) << name;
    const std::size_t element_bytes = name.ends_with("bf16") ? 2 : 4;
    for (const Row& row : rows) {
      EXPECT_EQ(row.count * element_bytes, row.bytes) << name;
      EXPECT_EQ(row.count % 2, 0u) << name << ": whole elements per rank";
      EXPECT_EQ(row.redop, name.starts_with("reduce") ? "sum" : "none");
      EXPECT_EQ(row.out_of_place.wrong, 0u) << name << " " << row.bytes;
      EXPECT_EQ(row.in_place.wrong, 0u) << name << " " << row.bytes;
      EXPECT_NEAR(row.in_place.busbw, row.in_place.algbw * 0.5, 0.001)
          << name << ": (n-1)/n on 2 ranks, to the printed 3 decimals";
    }
  }
  EXPECT_EQ(outcome.stdout_text.find("WRONG"), std::string::npos) << outcome.stdout_text;
  const auto record = results::read_comm(directory_ / "sharded.h5");
  ASSERT_EQ(record.tables.size(), 4u);
  EXPECT_EQ(record.tables[0].collective, "reduce_scatter");
  EXPECT_EQ(record.tables[0].dtype, "float");
}

// Every collective in both dtypes through the hierarchical backend, which sums in shared memory
// and leaves broadcast and alltoall to plain MPI.
TEST_F(CommCommandLine, EveryCollectiveIsExactThroughTheHierarchicalBackend) {
  const Outcome outcome = run_dlscale(
      "comm --comm mpi-hier --collective allreduce,reduce_scatter,all_gather,broadcast,alltoall "
      "--dtype float,bf16 -b 64 -e 4K -f 8 -n 2 -w 1 --out hier.h5");
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(outcome.rank_exit_codes[r], 0) << "rank " << r;
  const auto printed = tables(outcome.stdout_text);
  ASSERT_EQ(printed.size(), 10u) << outcome.stdout_text;
  for (const auto& [name, rows] : printed) {
    EXPECT_EQ(rows.size(), 3u) << name;  // 64, 512 and 4096 bytes
    for (const Row& row : rows) {
      EXPECT_EQ(row.out_of_place.wrong + row.in_place.wrong, 0u) << name << " " << row.bytes;
      EXPECT_EQ(row.root, name.starts_with("broadcast") ? 0 : -1) << name;
    }
  }
}

TEST_F(CommCommandLine, HelpTeachesWithAnExample) {
  const Outcome outcome = run_dlscale("comm --help");
  EXPECT_EQ(outcome.rank_exit_codes[0], 0);
  for (const char* expected :
       {"Usage: mpirun -np N dlscale comm", "--minbytes", "-b",
        "mpirun -np 2 dlscale comm -b 8 -e 64M -f 2", "rounded down", "--collective", "--dtype"})
    EXPECT_NE(outcome.stdout_text.find(expected), std::string::npos)
        << "no '" << expected << "' in:\n"
        << outcome.stdout_text;
}

TEST_F(CommCommandLine, UnknownCollectivesAndDtypesAreRefusedNamingTheChoices) {
  expect_refused("comm --collective reduce_scatter,gather",
                 "--collective: unknown collective 'gather' (available: allreduce, "
                 "reduce_scatter, all_gather, broadcast, alltoall)");
  expect_refused("comm --dtype float,fp16",
                 "--dtype: unknown dtype 'fp16' (available: float, bf16)");
  expect_refused("comm --dtype bf16,bf16", "bf16 is listed twice");
}

TEST_F(CommCommandLine, SizesTooSmallToSplitAreRefused) {
  // 4 bytes are one float: no whole float per rank on 2 ranks.
  expect_refused("comm --collective reduce_scatter -b 4 -e 4",
                 "reduce_scatter on 2 ranks in float needs at least 8 bytes");
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
  // 8, 16, 32, 64
  EXPECT_EQ(results::read_comm(directory_ / "again.h5").tables.at(0).times.sizes.size(), 4u);
}

}  // namespace
}  // namespace dlscale::testing
