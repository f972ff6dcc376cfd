// The /study table written from results/study_columns.hpp: every column of the table round-trips
// through a results file with its type and units, so a new column is tested by its entry alone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <type_traits>
#include <variant>

#include "results/hdf5_io.hpp"
#include "results/reader.hpp"
#include "results/schema.hpp"
#include "results/study_columns.hpp"
#include "results/writer.hpp"

namespace dlscale::results {
namespace {

namespace fs = std::filesystem;

// A value for column `index` of row `row` that no other column or row holds.
double distinct_number(std::size_t index, int row) { return 10.0 * double(index) + row + 0.25; }
int distinct_count(std::size_t index, int row) { return 10 * int(index) + row + 1; }
std::string distinct_text(std::size_t index, int row) {
  return "column " + std::to_string(index) + " row " + std::to_string(row);
}

// Sets `point`'s member of every column to its distinct value for `row`.
StudyPoint point_of_distinct_values(int row) {
  StudyPoint point;
  for (std::size_t index = 0; index < std::size(study_columns); ++index)
    std::visit(
        [&](auto member) {
          using Value = std::remove_reference_t<decltype(point.*member)>;
          if constexpr (std::is_same_v<Value, double>)
            point.*member = distinct_number(index, row);
          else if constexpr (std::is_same_v<Value, int>)
            point.*member = distinct_count(index, row);
          else
            point.*member = distinct_text(index, row);
        },
        study_columns[index].member);
  return point;
}

class ResultsFileStudyColumns : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() / ("dlscale_study_columns_" + std::to_string(getpid()));
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }
  fs::path directory_;
};

TEST_F(ResultsFileStudyColumns, EveryColumnRoundTripsWithItsTypeAndUnits) {
  ResultsFile written;
  written.origin = {"0.1.0", "abc123", "dlscale --ranks 1,2", "2026-11-27T12:00:00Z"};
  written.study = StudySummary{.scaling = "weak", .baseline_ranks = 1};
  const int rows = 2;
  for (int row = 0; row < rows; ++row)
    written.study->points.push_back(point_of_distinct_values(row));
  const fs::path path = directory_ / "study.h5";
  write_results(written, path, false);

  const OpenedResultsFile opened = open_results_file(path);
  const Hdf5Handle study = hdf5::open_group(opened.file, schema::study_group);
  for (std::size_t index = 0; index < std::size(study_columns); ++index) {
    const StudyColumn& column = study_columns[index];
    SCOPED_TRACE(column.name);
    ASSERT_TRUE(hdf5::has_child(study, column.name)) << "/study has no column " << column.name;
    const Hdf5Handle dataset = hdf5::open_dataset(study, column.name);
    EXPECT_EQ(hdf5::dataset_shape(dataset), std::vector<hsize_t>{hsize_t(rows)});
    if (column.units != nullptr)
      EXPECT_EQ(hdf5::read_string_attribute(dataset, schema::units), column.units);
    else
      EXPECT_FALSE(hdf5::has_attribute(dataset, schema::units)) << "units where the table has none";
    std::visit(
        [&](auto member) {
          using Value = std::remove_reference_t<decltype(StudyPoint{}.*member)>;
          for (int row = 0; row < rows; ++row) {
            if constexpr (std::is_same_v<Value, double>)
              EXPECT_EQ(hdf5::read_double_dataset(study, column.name).at(row),
                        distinct_number(index, row));
            else if constexpr (std::is_same_v<Value, int>)
              EXPECT_EQ(hdf5::read_int64_dataset(study, column.name).at(row),
                        distinct_count(index, row));
            else
              EXPECT_EQ(hdf5::read_string_dataset(study, column.name).at(row),
                        distinct_text(index, row));
          }
        },
        column.member);
  }
}

// Two entries of one name or one member fail the round trip above: HDF5 refuses the second
// dataset, or the second entry's value overwrites the first's.
TEST_F(ResultsFileStudyColumns, EachColumnSaysWhichSchemaBroughtItAndWhatItMeans) {
  for (const StudyColumn& column : study_columns) {
    SCOPED_TRACE(column.name);
    EXPECT_GE(column.since_version, 2) << "/study came with schema 2";
    EXPECT_LE(column.since_version, schema::version);
    EXPECT_GT(std::strlen(column.description), 0u);
  }
}

}  // namespace
}  // namespace dlscale::results
