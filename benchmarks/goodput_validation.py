#!/usr/bin/python3
"""Compares measured samples to target across global batches with the gradient noise scale's
prediction (docs/scaling-model.md, "Goodput: validated"). Input: the results files of
goodput_validation.sh, one per (batch per rank, learning rate), each a weak 1- and 2-rank sweep
with repeats trained to a held-out target.

For each global batch B (and rank count), the samples to target E(B) is the mean over repeats at
the learning rate whose repeats all reached the target in the fewest samples. B_noise is the mean
of the B_noise that the 2-rank runs at the smallest global batch measured at their best rate. The
model: E(B) = E(B0) (B_noise + B) / (B_noise + B0), with B0 the smallest global batch (1 rank);
statistical efficiency SE(B) = E(B0) / E(B). The error is that of the predicted SE against the
measured one; time to target is predicted as the predicted E(B) over the run's own samples/s."""
import collections
import statistics
import sys

import h5py


def runs_of(paths):
    """(ranks, global batch, learning rate) -> [(samples, seconds, B_noise, samples/s)]."""
    runs = collections.defaultdict(list)
    for path in paths:
        with h5py.File(path, "r") as f:
            for run in f["runs"].values():
                summary = run["summary"].attrs
                ranks = int(run.attrs["world_size"])
                key = (ranks, int(run.attrs["batch_per_rank"]) * ranks,
                       float(run.attrs["base_learning_rate"]))
                reached = "samples_to_target" in summary
                runs[key].append((float(summary["samples_to_target"]) if reached else None,
                                  float(summary["seconds_to_target"]) if reached else None,
                                  float(summary["noise_scale"]),
                                  float(summary["throughput_samples_per_second"])))
    return runs


def best_rates(runs, repeats_needed):
    """(ranks, global batch) -> (rate, runs) where every repeat reached, fewest mean samples."""
    best = {}
    for (ranks, batch, rate), results in runs.items():
        if len(results) < repeats_needed or any(r[0] is None for r in results):
            continue
        samples = statistics.mean(r[0] for r in results)
        if (ranks, batch) not in best or samples < best[(ranks, batch)][2]:
            best[(ranks, batch)] = (rate, results, samples)
    return best


def main(paths):
    runs = runs_of(paths)
    repeats = max(len(r) for r in runs.values())
    best = best_rates(runs, repeats)
    base_ranks, base_batch = min(best, key=lambda k: (k[1], k[0]))
    base_samples = best[(base_ranks, base_batch)][2]
    noise_batch = min(b for (n, b) in best if n > 1)
    noise = statistics.mean(r[2] for r in best[(2, noise_batch)][1])
    print(f"B_noise {noise:.4g} samples: 2-rank runs at global batch {noise_batch}, their best "
          f"rate; baseline: global batch {base_batch} ({base_ranks} rank), "
          f"{base_samples:.0f} samples to target; {repeats} repeats per point\n")
    print("| ranks | global batch | best lr | samples to target | predicted | SE measured "
          "| SE predicted | error | seconds to target | predicted s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    errors = []
    for (ranks, batch) in sorted(best, key=lambda k: (k[1], k[0])):
        rate, results, samples = best[(ranks, batch)]
        predicted = base_samples * (noise + batch) / (noise + base_batch)
        se_measured, se_predicted = base_samples / samples, base_samples / predicted
        error = se_predicted / se_measured - 1
        errors.append((batch, error))
        seconds = statistics.mean(r[1] for r in results)
        throughput = statistics.mean(r[3] for r in results)
        print(f"| {ranks} | {batch} | {rate:g} | {samples:.0f} | {predicted:.0f} | "
              f"{se_measured:.3f} | {se_predicted:.3f} | {error * 100:+.1f}% | {seconds:.4g} | "
              f"{predicted / throughput:.4g} |")
    span = max(b for b, _ in errors) / min(b for b, _ in errors)
    worst = max(errors, key=lambda e: abs(e[1]))
    print(f"\nlargest error of the predicted statistical efficiency over a {span:.0f}x range of "
          f"global batch: {worst[1] * 100:+.1f}% (global batch {worst[0]})")


if __name__ == "__main__":
    main(sys.argv[1:])
