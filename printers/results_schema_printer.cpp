#include "printers/results_schema_printer.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "printers/json_text.hpp"
#include "results/schema.hpp"
#include "results/study_columns.hpp"

namespace dlscale::printers {

std::string format_study_columns_table() {
  std::size_t name_width = std::strlen("column");
  for (const auto& column : results::study_columns)
    name_width = std::max(name_width, std::strlen(column.name));
  const auto line = [&](const char* name, const char* type, const char* units,
                        const std::string& since, const char* description) {
    return fmt::format("{:<{}}  {:<7}  {:<9}  {:<5}  {}\n", name, name_width, type, units, since,
                       description);
  };
  std::string out = fmt::format(
      "The columns of /study in results schema {} (docs/results-format.md describes them):\n\n",
      results::schema::version);
  out += line("column", "type", "units", "since", "meaning");
  for (const auto& column : results::study_columns)
    out += line(column.name, results::stored_type(column),
                column.units != nullptr ? column.units : "-",
                fmt::format("{}", column.since_version), column.description);
  return out;
}

std::string format_results_schema_json() {
  std::string out =
      fmt::format("{{\"schema_version\": {},\n \"study_columns\": [\n", results::schema::version);
  bool first = true;
  for (const auto& column : results::study_columns) {
    out += fmt::format(
        "{}  {{\"name\": {}, \"type\": {}, \"units\": {}, \"since_version\": {}, "
        "\"minimum\": {}, \"may_be_nan\": {}, \"may_be_infinite\": {}, \"description\": {}}}",
        first ? "" : ",\n", json_string(column.name), json_string(results::stored_type(column)),
        column.units != nullptr ? json_string(column.units) : "null", column.since_version,
        column.least ? json_number(*column.least) : "null", column.may_be_nan ? "true" : "false",
        column.may_be_unbounded ? "true" : "false", json_string(column.description));
    first = false;
  }
  return out + "\n ]}\n";
}

}  // namespace dlscale::printers
