// What `dlscale schema` prints: the /study columns of results/study_columns.hpp as a table for
// people, and as JSON for the report's reader and the docs test. It only formats.
#pragma once

#include <string>

namespace dlscale::printers {

// One line per column: name, type, units, the schema version that brought it, its meaning.
std::string format_study_columns_table();

// {"schema_version": N, "study_columns": [{"name", "type" (float64, int64 or string), "units"
// (null for none), "since_version", "minimum" (null for none), "may_be_nan", "description"},
// ...]}, one column per line, in the order the writer writes them.
std::string format_results_schema_json();

}  // namespace dlscale::printers
