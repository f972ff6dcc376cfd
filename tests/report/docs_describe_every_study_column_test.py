# docs/results-format.md describes every /study column that `dlscale schema --json` exports (the
# writer's own table, results/study_columns.hpp) in a row of its /study tables, with the type and
# units the export gives, and names no column that the writer does not write: a column added to
# the table fails here until the page describes it.
# usage: docs_describe_every_study_column_test.py RESULTS_SCHEMA_JSON
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(HERE, "..", "..", "docs", "results-format.md")
SECTION = "## `/study`: scaling across runs"


def documented_columns(page):
    """{name: (type, units)} of every row of the /study section's tables whose header names a
    type and units: a row may name several datasets, in backticks, that share them."""
    start = page.find(SECTION)
    if start < 0:
        sys.exit(f"FAIL: docs/results-format.md has no section {SECTION!r}")
    end = page.find("\n## ", start + len(SECTION))
    columns, header = {}, None
    for line in page[start:end if end >= 0 else None].splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif set(cells[0]) <= {"-"} or header[:3] != ["dataset", "type", "units"]:
            continue
        else:
            for name in re.findall(r"`([^`]+)`", cells[0]):
                columns[name] = (cells[1], cells[2])
    return columns


def main():
    if len(sys.argv) != 2:
        print("usage: docs_describe_every_study_column_test.py RESULTS_SCHEMA_JSON")
        return 2
    with open(sys.argv[1], encoding="utf-8") as export:
        exported = json.load(export)["study_columns"]
    with open(PAGE, encoding="utf-8") as page:
        documented = documented_columns(page.read())
    failures = []
    for column in exported:
        name, units = column["name"], column["units"] or ""
        if name not in documented:
            failures.append(f"/study/{name} ({column['type']}, units {units or 'none'}) has no "
                            f"row in the /study tables")
        elif documented[name] != (column["type"], units):
            failures.append(f"/study/{name} is documented as {documented[name]}, but written as "
                            f"{(column['type'], units)} (type, units)")
    names = {column["name"] for column in exported}
    failures += [f"the /study tables describe {name}, which the writer does not write"
                 for name in sorted(set(documented) - names)]
    for failure in failures:
        print(f"FAIL: docs/results-format.md: {failure}")
    if not failures:
        print(f"ok: docs/results-format.md describes the {len(exported)} /study columns the "
              f"writer writes, with their types and units")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
