# The README's option table names the devices (`--device`) and the comm backends (`--comm`) by
# hand; the registries (kernels/device_factory.cpp, comm/communicator_factory.cpp) are what dlscale
# takes. This fails where the two lists differ, reading the registries from the built binary's
# `dlscale comm --help`, which lists both from their records (built in or not), in their order.
# usage: readme_names_the_registries_test.py DLSCALE
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def help_choices(help_text, option):
    """The names `option`'s help lists: 'where ...: a, b or c (...); ...' read up to ' (' or ';'.

    Boost wraps each description over lines indented to one column; they are joined first."""
    lines = help_text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(rf"\s+{option} ", line)), None)
    if start is None:
        return None
    # The first line after the option's column: "  --comm arg (=mpi)    DESCRIPTION".
    description = [re.sub(r"^\s+\S+ arg( \(=[^)]*\))?\s+", "", lines[start])]
    for line in lines[start + 1:]:
        if not re.match(r"\s{10,}\S", line):
            break
        description.append(line.strip())
    text = " ".join(description)
    if ": " not in text:
        return None
    listed = re.split(r" \(|;", text.split(": ", 1)[1])[0]
    return [name for name in re.split(r",\s*|\s+or\s+", listed.strip()) if name]


def readme_choices(readme_text, option):
    """The `quoted` names in the meaning column of the README's option-table row for `option`."""
    row = re.search(rf"^\| `{re.escape(option)}` \|[^|]*\|([^\n]*)\|$", readme_text, re.MULTILINE)
    if row is None:
        return None
    return re.findall(r"`([a-z][a-z0-9-]*)`", row.group(1))


def main():
    dlscale = sys.argv[1]
    help_text = subprocess.run([dlscale, "comm", "--help"], capture_output=True, text=True,
                               check=True).stdout
    readme_text = (ROOT / "README.md").read_text(encoding="utf-8")
    failures = []
    for option, registry in [("--device", "kernels/device_factory.cpp"),
                             ("--comm", "comm/communicator_factory.cpp")]:
        registered = help_choices(help_text, option)
        listed = readme_choices(readme_text, option)
        if not registered:
            failures.append(f"`dlscale comm --help` lists no choices for {option} "
                            f"(its wording changed?): cannot read {registry}'s records")
        elif listed is None:
            failures.append(f"README.md has no row for {option} in its option table")
        elif listed != registered:
            failures.append(f"README.md's {option} row names {', '.join(listed) or 'nothing'}; "
                            f"{registry} registers {', '.join(registered)}, in that order")
        else:
            print(f"ok: README.md's {option} row names {', '.join(listed)}, as {registry} does")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
