# A device, a comm backend, a precision or a scaling mode is named in one place, its registry
# (kernels/device_factory.cpp, comm/communicator_factory.cpp, kernels/device.hpp,
# results/run_record.hpp); everything
# else holds the enum. This fails where a source file outside them compares a value with one of
# those names written as a string literal, or tests a name's prefix, which is how option strings
# used to travel past the command line.
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]
registries = {"kernels/device_factory.cpp", "comm/communicator_factory.cpp",
              "results/run_record.hpp", "kernels/device.hpp"}
names = ["cpu", "cuda", "mpi", "mpi-nbc", "mpi-hier", "nccl", "weak", "strong", "fp32", "tf32"]
literal = "|".join(re.escape(name) for name in names)
comparison = re.compile(rf'(==|!=)\s*"({literal})"|"({literal})"\s*(==|!=)'
                        rf'|\.(compare|starts_with|rfind|find)\(\s*"({literal})"')

hits = []
for folder in ["analysis", "cli", "comm", "core", "driver", "gpu_module", "kernels", "model",
               "printers", "results", "worker", "workloads", "benchmarks"]:
    for path in sorted((root / folder).rglob("*")):
        if path.suffix not in (".cpp", ".hpp", ".cu", ".cuh"):
            continue
        relative = path.relative_to(root).as_posix()
        if relative in registries or relative.startswith("benchmarks/peers/"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if comparison.search(line.split("//")[0]):
                hits.append(f"{relative}:{number}: {line.strip()}")

for hit in hits:
    print(f"FAIL: a registered name compared outside its registry: {hit}")
if not hits:
    print(f"ok: no source file outside the registries compares a value with {', '.join(names)}")
sys.exit(1 if hits else 0)
