# An option's values are named in one place: a device or comm backend in its registry
# (kernels/device_factory.cpp, comm/communicator_factory.cpp), a collective of `dlscale comm` in its
# record (worker/swept_collectives/), every other choice (precision,
# scaling mode, learning-rate rule, target metric, gradient dtype, predict's algorithm and overlap,
# --probe, the DLSCALE_* settings) in an EnumNames table beside its enum; everything else holds
# the enum. This fails where a source file compares a value with one of those names written as a
# string literal, or tests a name's prefix, which is how option strings used to travel past the
# command line. The names are read from the tables themselves, so a new table is covered as soon
# as it is written.
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]
folders = ["analysis", "cli", "comm", "coordinator", "core", "gpu_module", "kernels",
           "model", "printers", "results", "worker", "workloads", "benchmarks"]
registries = {"kernels/device_factory.cpp", "comm/communicator_factory.cpp"}
# Lines that compare a literal which is a name only by coincidence, each with why.
coincidences = {
    # oneDNN's ISA names (avx512_core_bf16, avx512_core_amx) say whether the CPU has bf16 units.
    ("kernels/cpu/cpu_device.cpp", 'isa.find("bf16")'),
    # The device property "cudnn" (cuDNN's version), not a value of
    # DLSCALE_CUDA_NCHW_BIAS_RELU or DLSCALE_CUDA_NCHW_POOLING.
    ("printers/summary_printer.cpp", 'name == "cudnn"'),
}
# Words that options take instead of a number, and registry names not in an EnumNames table.
extra_names = {"auto", "all", "cpu", "cuda", "mpi", "mpi-nbc", "mpi-hier", "nccl", "allreduce",
               "reduce_scatter", "all_gather", "broadcast", "alltoall"}


def sources():
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".cpp", ".hpp", ".cu", ".cuh"):
                relative = path.relative_to(root).as_posix()
                if not relative.startswith("benchmarks/peers/"):
                    yield relative, path.read_text()


table = re.compile(r"EnumNames<[^>]*>\s*\w+\s*\{\s*\{([^}]*)\}", re.S)
names = set(extra_names)
tables = 0
for relative, text in sources():
    for match in table.finditer(text):
        tables += 1
        names.update(re.findall(r'"([^"]+)"', match.group(1)))
# The tables this test was written against; a table that the pattern above stops finding
# would otherwise let its names through unchecked.
for expected in ["fp32", "bf16", "weak", "linear", "sqrt", "accuracy", "loss", "ring", "measured",
                 "yes", "graph", "openblas"]:
    if expected not in names:
        print(f"FAIL: no EnumNames table names '{expected}': has the table moved or changed form?")
        sys.exit(1)

literal = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
comparison = re.compile(rf'(==|!=)\s*"({literal})"|"({literal})"\s*(==|!=)'
                        rf'|\.(compare|starts_with|ends_with|rfind|find)\(\s*"({literal})"')

hits = []
for relative, text in sources():
    if relative in registries:
        continue
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("//")[0]
        if comparison.search(code) and not any(
                relative == path and fragment in code for path, fragment in coincidences):
            hits.append(f"{relative}:{number}: {line.strip()}")

for hit in hits:
    print(f"FAIL: an option value compared with a string literal outside its name table: {hit}")
if not hits:
    print(f"ok: no source file compares a value with any of the {len(names)} names of "
          f"{tables} name tables and the registries")
sys.exit(1 if hits else 0)
