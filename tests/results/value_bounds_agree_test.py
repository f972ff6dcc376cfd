"""The bounds every reader holds a results file to are written three times: for the C++ readers
(results/value_bounds.hpp), for the report (report/dlscale_results.py) and for people
(docs/results-format.md, "Bounds every reader holds a file to"). This checks that all three say the
same numbers, so that no reader accepts what another calls damaged.

usage: value_bounds_agree_test.py SOURCE_DIR
"""
import os
import re
import sys

# C++ name -> the report's name.
REPORT_NAMES = {"largest_value": "LARGEST_VALUE", "longest_seconds": "LONGEST_SECONDS",
                "shortest_step_seconds": "SHORTEST_STEP_SECONDS", "most_runs": "MAX_SWEEP_POINTS",
                "largest_target_loss": "LARGEST_TARGET_LOSS",
                "read_cpu_seconds": "READ_CPU_SECONDS",
                "read_bytes_per_cpu_second": "READ_BYTES_PER_CPU_SECOND"}
UNITS = {"": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def arithmetic(text):
    """The value of a constant expression of numbers, *, ** and parentheses."""
    if not re.fullmatch(r"[0-9eE.+\-*() ']+", text):
        raise ValueError(f"not a constant expression: {text!r}")
    return eval(text.replace("'", ""), {"__builtins__": {}})


def cpp_bounds(path):
    with open(path) as source:
        return {name: arithmetic(value) for name, value in re.findall(
            r"inline constexpr (?:\w+ )+(\w+) = ([^;]+);", source.read())}


def report_bounds(path):
    with open(path) as source:
        text = source.read()
    found = {}
    for name in REPORT_NAMES.values():
        match = re.search(rf"^{name} = ([^#\n]+)", text, re.MULTILINE)
        found[name] = arithmetic(match.group(1).strip()) if match else None
    return found


def documented_bounds(path):
    with open(path) as source:
        text = source.read()
    section = text.split("## Bounds every reader holds a file to", 1)[1].split("\n## ", 1)[0]
    found = {}
    for names, values in re.findall(r"^\| (`\w+`(?:, `\w+`)*) \| ([^|]+) \|", section,
                                    re.MULTILINE):
        for name, value in zip(re.findall(r"`(\w+)`", names), values.split(",")):
            number, _, unit = value.strip().partition(" ")
            found[name] = arithmetic(number) * UNITS[unit]
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    source = sys.argv[1]
    cpp = cpp_bounds(os.path.join(source, "results", "value_bounds.hpp"))
    report = report_bounds(os.path.join(source, "report", "dlscale_results.py"))
    docs = documented_bounds(os.path.join(source, "docs", "results-format.md"))
    problems = []
    if set(cpp) != set(REPORT_NAMES):
        problems.append(f"results/value_bounds.hpp defines {sorted(cpp)}; this test knows "
                        f"{sorted(REPORT_NAMES)}: name the new bound's report constant here")
    for name, report_name in REPORT_NAMES.items():
        values = {"results/value_bounds.hpp": cpp.get(name),
                  f"report/dlscale_results.py ({report_name})": report.get(report_name),
                  "docs/results-format.md": docs.get(name)}
        if len(set(values.values())) != 1 or None in values.values():
            problems.append(f"{name}: " + ", ".join(f"{where} says {value}"
                                                    for where, value in values.items()))
    for problem in problems:
        print(problem)
    print(f"{len(REPORT_NAMES)} bounds checked, {len(problems)} disagree")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
