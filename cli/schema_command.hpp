// `dlscale schema`: the columns a results file's /study table holds (results/study_columns.hpp),
// as a table for people or, with --json, for the report's reader and the docs test.
#pragma once

namespace dlscale::cli {

// argv[0] is `schema`; returns the exit status.
int schema_command(int argc, char** argv);

}  // namespace dlscale::cli
