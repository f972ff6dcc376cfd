# The schema version is defined once, in results/schema.hpp: the writer stamps it into every file
# and the report reads it from there (dlscale_results.newest_schema_version). This checks that
# every place in docs/ that states it states that number, so the pages cannot drift from the code.
# usage: docs_name_the_schema_version_test.py
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "report"))
sys.dont_write_bytecode = True
from dlscale_results import newest_schema_version  # noqa: E402 - after the path is set

# (page, pattern whose groups must read as the given offsets from the version, offsets): every
# statement of the version on the pages, each of which must be found.
STATEMENTS = [
    ("results-format.md", r"Schema version: \*\*(\d+)\*\*", [0]),
    ("results-format.md", r"Layout version; (\d+) for this page", [0]),
    ("results-format.md", r'assert f\.attrs\["schema_version"\] == (\d+)', [0]),
    ("report.md", r"reads schemas 1 to (\d+)", [0]),
    # The refusal of a newer file, as the report prints it.
    ("report.md", r"schema version (\d+) is not supported \(this report reads 1 to (\d+)\)",
     [1, 0]),
]


def main():
    version = newest_schema_version()
    failures = 0
    for page, pattern, offsets in STATEMENTS:
        with open(os.path.join(ROOT, "docs", page), encoding="utf-8") as handle:
            found = re.findall(pattern, handle.read())
        if not found:
            print(f"FAIL: docs/{page} no longer says /{pattern}/")
            failures += 1
        for groups in found:
            numbers = [int(g) for g in ([groups] if isinstance(groups, str) else groups)]
            expected = [version + offset for offset in offsets]
            if numbers != expected:
                print(f"FAIL: docs/{page} says {numbers} where /{pattern}/ should read {expected}"
                      f" (results/schema.hpp: version {version})")
                failures += 1
    if not failures:
        print(f"ok: docs/ state schema version {version}, as results/schema.hpp does")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
