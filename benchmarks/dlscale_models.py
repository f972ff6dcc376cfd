"""What the framework references share about dlscale's workloads: each model's reference CPU
batch, and the parameter counts `dlscale --list-models` prints, which every reference checks its
own network against before timing it."""
import os
import subprocess
import sys

# Reference CPU batch per model, as `dlscale --list-models` prints it in its "CPU batch" column.
BATCH = {"fcn-s": 64, "fcn-r": 1024, "alexnet-r": 1024, "alexnet-s": 16, "vgg-16": 16,
         "resnet-56": 128, "resnet-50": 16, "mobilenet-v2": 16, "lstm-32": 128, "lstm-64": 128,
         "gpt-tiny": 16, "gpt2-small": 8, "gpt2-medium": 4}
# The CPU batch of a gpt: spec (dlscale's default_gpt_batch).
DEFAULT_GPT_BATCH = 8


def dlscale_parameter_counts(dlscale):
    """{model: parameters} for the models above, from `dlscale --list-models`; exits with one
    line when dlscale cannot be run or disagrees with BATCH."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        listing = subprocess.run([dlscale, "--list-models"], check=True, capture_output=True,
                                 text=True, env=env).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"cannot run {dlscale} --list-models: {error}")
    rows = [line.split() for line in listing.splitlines()]
    header = rows[0] if rows else []
    if header[:3] != ["model", "family", "parameters"] or "CPU" not in header:
        sys.exit(f"{dlscale} --list-models: no 'model family parameters ... CPU batch' header")
    batch_column = header.index("CPU")  # "CPU batch" is two words in the header, one in a row
    counts = {}
    for fields in rows[1:]:
        if len(fields) > batch_column and fields[0] in BATCH:
            counts[fields[0]] = int(fields[2].replace(",", ""))
            if fields[batch_column] != str(BATCH[fields[0]]):
                sys.exit(f"{dlscale} --list-models gives {fields[0]} a CPU batch of "
                         f"{fields[batch_column]}, the references {BATCH[fields[0]]}")
    missing = set(BATCH) - set(counts)
    if missing:
        sys.exit(f"{dlscale} --list-models does not list {', '.join(sorted(missing))}")
    return counts
