"""What the framework references share about dlscale's workloads: each model's reference CPU
batch, and the parameter counts `dlscale --list-models` prints, which every reference checks its
own network against before timing it."""
import os
import subprocess
import sys

# Reference CPU batch per model, as `dlscale --list-models` prints it in its "CPU batch" column.
BATCH = {"fcn-s": 64, "fcn-r": 1024, "alexnet-r": 1024, "alexnet-s": 16, "vgg-16": 16,
         "resnet-56": 128, "resnet-50": 16, "mobilenet-v2": 16, "lstm-32": 128, "lstm-64": 128}


def dlscale_parameter_counts(dlscale):
    """{model: parameters} for the models above, from `dlscale --list-models`; exits with one
    line when dlscale cannot be run or disagrees with BATCH."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        listing = subprocess.run([dlscale, "--list-models"], check=True, capture_output=True,
                                 text=True, env=env).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"cannot run {dlscale} --list-models: {error}")
    counts = {}
    for fields in (line.split() for line in listing.splitlines()):
        if len(fields) > 4 and fields[0] in BATCH:
            counts[fields[0]] = int(fields[2].replace(",", ""))
            if fields[4] != str(BATCH[fields[0]]):
                sys.exit(f"{dlscale} --list-models gives {fields[0]} a CPU batch of "
                         f"{fields[4]}, the references {BATCH[fields[0]]}")
    return counts
