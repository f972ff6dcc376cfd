# `dlscale schema`: --json prints the writer's table of /study columns (results/study_columns.hpp)
# as JSON of the schema version results/schema.hpp defines, and the build's results_schema.json
# (installed beside the report, which reads it) is that output; without --json the columns print
# as a table; --help teaches; a bad option or a stray word is one line and status 2.
# usage: results_schema_export_test.py DLSCALE RESULTS_SCHEMA_JSON
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_HEADER = os.path.join(HERE, "..", "..", "results", "schema.hpp")
FIELDS = {"name": str, "type": str, "units": (str, type(None)), "since_version": int,
          "minimum": (int, float, type(None)), "may_be_nan": bool, "may_be_infinite": bool,
          "description": str}
TYPES = {"float64", "int64", "string"}


class Failure(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failure(message)


def dlscale(*arguments):
    return subprocess.run([DLSCALE, "schema", *arguments], capture_output=True, text=True,
                          timeout=60)


def test_json_lists_each_column_once_with_every_field():
    result = dlscale("--json")
    expect(result.returncode == 0, f"schema --json exited {result.returncode}: {result.stderr}")
    exported = json.loads(result.stdout)
    with open(SCHEMA_HEADER, encoding="utf-8") as header:
        version = int(re.search(r"^inline constexpr long long version = (\d+);", header.read(),
                                re.M).group(1))
    expect(exported["schema_version"] == version,
           f"schema_version {exported['schema_version']}, results/schema.hpp says {version}")
    columns = exported["study_columns"]
    names = [column["name"] for column in columns]
    expect(len(names) == len(set(names)), f"a column is listed twice: {names}")
    for column in columns:
        for field, kind in FIELDS.items():
            expect(isinstance(column.get(field), kind), f"{column.get('name')}: {field} is "
                                                         f"{column.get(field)!r}")
        expect(column["type"] in TYPES, f"{column['name']}: type {column['type']}")
        expect(2 <= column["since_version"] <= version,
               f"{column['name']}: since_version {column['since_version']}")
    for name in ["ranks", "iteration_seconds", "efficiency", "goodput_samples_per_second"]:
        expect(name in names, f"{name} is not listed: {names}")


def test_the_builds_export_is_what_dlscale_prints():
    with open(EXPORT, encoding="utf-8") as export:
        built = export.read()
    expect(built == dlscale("--json").stdout,
           f"{EXPORT} differs from `dlscale schema --json`: the build did not rewrite it")


def test_without_json_every_column_prints_as_a_row():
    result = dlscale()
    expect(result.returncode == 0, f"schema exited {result.returncode}: {result.stderr}")
    rows = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    missing = [c["name"] for c in json.loads(dlscale("--json").stdout)["study_columns"]
               if c["name"] not in rows]
    expect(not missing, f"the table lacks {missing}:\n{result.stdout}")


def test_help_says_what_the_export_is_for():
    result = dlscale("--help")
    expect(result.returncode == 0, f"schema --help exited {result.returncode}")
    for text in ["--json", "results_schema.json", "dlscale report", "Usage: dlscale schema"]:
        expect(text in result.stdout, f"--help does not mention {text!r}:\n{result.stdout}")


def test_a_bad_option_or_a_stray_word_is_one_line_and_status_2():
    for arguments in [["--jsn"], ["study.h5"], ["--json=yes"]]:
        result = dlscale(*arguments)
        lines = result.stderr.splitlines()
        expect(result.returncode == 2 and len(lines) == 1 and
               lines[0].startswith("dlscale: error: ") and not result.stdout,
               f"schema {' '.join(arguments)}: exit {result.returncode}, stdout "
               f"{result.stdout[:200]!r}, stderr {result.stderr!r}")


def main():
    global DLSCALE, EXPORT
    if len(sys.argv) != 3:
        print("usage: results_schema_export_test.py DLSCALE RESULTS_SCHEMA_JSON")
        return 2
    DLSCALE, EXPORT = sys.argv[1:]
    failures = 0
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            try:
                test()
                print(f"ok: {name}")
            except Failure as failure:
                print(f"FAIL: {name}: {failure}")
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
