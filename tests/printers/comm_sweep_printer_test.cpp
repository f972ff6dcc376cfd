// The tables of `dlscale comm` as nccl-tests lays them out: a row per size with the out-of-place
// and then the in-place columns, the average bus bandwidth under each table, and a fit whose alpha
// is not a latency said to be none instead of printed as one.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "printers/comm_sweep_printer.hpp"

namespace dlscale::printers {
namespace {

results::CommRecord one_table(double alpha_seconds) {
  results::CommRecord record;
  record.dlscale_version = "0.1.0";
  record.backend = "mpi";
  record.ranks = 4;
  record.node_count = 1;
  record.measured_iterations = 3;
  results::CommTable table;
  table.collective = "reduce_scatter";
  table.dtype = "bf16";
  table.bus_bandwidth_factor = 0.75;
  table.latency_steps = 3;
  table.average_busbw_gbps = 1.25;
  results::CommSizeStatistics size{64,    32,    2e-6, 3e-6,   0.032, 0.021,
                                   0.024, 0.016, 0,    2.5e-6, 1e-6,  4e-6};
  table.times.sizes = {size};
  size.seconds_p50 = 5e-6;
  size.wrong_elements = 2;
  table.times.out_of_place_sizes = {size};
  table.times.fit = {3 * alpha_seconds, 1e-9, alpha_seconds, 1e-9 / 0.75, 0.1, 0.2};
  record.tables = {table};
  return record;
}

std::vector<std::string> rows(const std::string& text) {
  std::vector<std::string> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] != '#') rows.push_back(line);
  return rows;
}

TEST(CommSweepPrinter, ARowHoldsOutOfPlaceThenInPlaceColumns) {
  const std::string text = format_comm_tables(one_table(5e-7));
  const auto lines = rows(text);
  ASSERT_EQ(lines.size(), 1u) << text;
  std::istringstream row(lines[0]);
  std::string type, redop;
  std::uint64_t bytes = 0, count = 0, out_wrong = 9, in_wrong = 9;
  int root = 0;
  double out[7] = {}, in[7] = {};
  row >> bytes >> count >> type >> redop >> root;
  for (double& value : out) row >> value;
  row >> out_wrong;
  for (double& value : in) row >> value;
  row >> in_wrong;
  ASSERT_TRUE(row) << lines[0];
  EXPECT_EQ(bytes, 64u);
  EXPECT_EQ(count, 32u);
  EXPECT_EQ(type + " " + redop, "bf16 sum");
  EXPECT_EQ(root, -1);
  EXPECT_DOUBLE_EQ(out[0], 5.0) << "out-of-place p50 in us";
  EXPECT_EQ(out_wrong, 2u);
  EXPECT_DOUBLE_EQ(in[0], 2.0) << "in-place p50 in us";
  EXPECT_DOUBLE_EQ(in[2], 2.5) << "in-place mean";
  EXPECT_DOUBLE_EQ(in[3], 1.0) << "in-place min";
  EXPECT_DOUBLE_EQ(in[4], 4.0) << "in-place max";
  EXPECT_EQ(in_wrong, 0u);
  for (const char* expected :
       {"out-of-place", "in-place", "#wrong", "Avg bus bandwidth    : 1.2500",
        "wrong elements: 2 (WRONG RESULTS)"})
    EXPECT_NE(text.find(expected), std::string::npos) << "no '" << expected << "' in\n" << text;
}

TEST(CommSweepPrinter, ALatencyIsPrintedPerStep) {
  const std::string text = format_comm_tables(one_table(5e-7));
  EXPECT_NE(text.find("0.500 us per step"), std::string::npos) << text;
  EXPECT_EQ(text.find("not a latency"), std::string::npos) << text;
}

TEST(CommSweepPrinter, ANegativeAlphaIsSaidToBeNoLatency) {
  const std::string text = format_comm_tables(one_table(-2e-6));
  EXPECT_NE(text.find("not a latency: alpha = -2.000 us per step is below zero"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("us per step\n"), std::string::npos) << "printed as a latency:\n" << text;
}

TEST(CommSweepPrinter, AnAlphaAboveTheSmallestTimeIsSaidToBeNoLatency) {
  const std::string text = format_comm_tables(one_table(3e-6));  // the only time is 2 us
  EXPECT_NE(text.find("not a latency: alpha = 3.000 us per step is above the smallest measured "
                      "time, 2.000 us"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace dlscale::printers
