"""Joins the RESULT lines of benchmarks/compare_with_frameworks.sh into its Markdown table:
the median over rounds of each tool's median training step, per model and thread count, and
the fastest peer's step divided by dlscale's (above 1: dlscale is faster)."""
import collections
import statistics
import sys

TOOLS = ("dlscale", "torch-eager", "torch-compile", "tensorflow-xla", "tensorflow-graph")
HEADERS = ("dlscale", "PyTorch eager", "torch.compile", "TF/Keras XLA", "TF/Keras graph")
GOAL = 1.25  # issue 20: every workload at least 1.25x faster than the fastest peer


def read(path):
    """{(model, batch, threads): {tool: ([step seconds per round], [compile s], [failures])}}"""
    cases = collections.OrderedDict()
    for line in open(path):
        fields = line.split()
        if len(fields) < 8 or fields[0] != "round" or fields[2] != "RESULT":
            continue
        tool, model, batch, threads = fields[3], fields[4], int(fields[5]), int(fields[6])
        steps, compiles, failures = cases.setdefault((model, batch, threads), {}).setdefault(
            tool, ([], [], []))
        if fields[7] == "failed":
            failures.append(" ".join(fields[8:]) or "failed")
        else:
            steps.append(float(fields[7]))
            if len(fields) > 8 and fields[8] not in ("-", "0.000"):
                compiles.append(float(fields[8]))
    return cases


def cell(entry):
    if entry is None:
        return "not run"
    steps, compiles, failures = entry
    if not steps:
        return "failed: " + failures[0].replace("|", "/")[:120]
    text = f"{statistics.median(steps):.4f}"
    if len(steps) > 1:
        text += f" ({min(steps):.4f}-{max(steps):.4f})"
    if compiles:
        text += f" [+{statistics.median(compiles):.0f} s compile]"
    return text


def print_per_thread_count(cases):
    """The reference study's view: time per mini-batch of each tool at each thread count, and the
    speed-up from the fewest to the most threads."""
    thread_counts = sorted({threads for _, _, threads in cases})
    if len(thread_counts) < 2:
        return
    print("\nTime per mini-batch (s) at each thread count, and the speed-up from "
          f"{thread_counts[0]} to {thread_counts[-1]} threads:\n")
    print("| model | batch | tool | " + " | ".join(f"{t} thread(s)" for t in thread_counts)
          + " | speed-up |")
    print("|---|---:|---|" + "---:|" * len(thread_counts) + "---:|")
    models = list(dict.fromkeys((model, batch) for model, batch, _ in cases))
    for model, batch in models:
        for tool, header in zip(TOOLS, HEADERS):
            steps = [cases.get((model, batch, t), {}).get(tool, ([], [], []))[0]
                     for t in thread_counts]
            medians = [statistics.median(s) if s else None for s in steps]
            if all(m is None for m in medians):
                continue
            cells = [f"{m:.4f}" if m is not None else "-" for m in medians]
            speedup = (f"{medians[0] / medians[-1]:.2f}"
                       if medians[0] is not None and medians[-1] is not None else "n/a")
            print(f"| {model} | {batch} | {header} | " + " | ".join(cells) + f" | {speedup} |")


def main():
    cases = read(sys.argv[1])
    if not cases:
        sys.exit(f"{sys.argv[1]}: no RESULT lines")
    print("| model | batch | threads | " + " | ".join(f"{h} step s" for h in HEADERS)
          + " | fastest peer | fastest peer / dlscale |")
    print("|---|---:|---:|" + "---:|" * len(HEADERS) + "---|---:|")
    verdicts = []
    for (model, batch, threads), tools in sorted(cases.items(), key=lambda c: (c[0][2],)):
        medians = {tool: statistics.median(tools[tool][0]) for tool in TOOLS
                   if tool in tools and tools[tool][0]}
        peers = {tool: seconds for tool, seconds in medians.items() if tool != "dlscale"}
        if "dlscale" in medians and peers:
            fastest = min(peers, key=peers.get)
            ratio = peers[fastest] / medians["dlscale"]
            verdict, ratio_text = HEADERS[TOOLS.index(fastest)], f"{ratio:.2f}"
            verdicts.append((model, threads, ratio))
        else:
            verdict, ratio_text = "n/a", "n/a"
        print(f"| {model} | {batch} | {threads} | "
              + " | ".join(cell(tools.get(tool)) for tool in TOOLS)
              + f" | {verdict} | {ratio_text} |")
    print_per_thread_count(cases)
    if verdicts:
        behind = [f"{m} at {t} thread(s) ({r:.2f})" for m, t, r in verdicts if r < GOAL]
        print(f"\nGoal (fastest peer / dlscale >= {GOAL}): "
              + ("holds for every case." if not behind else
                 f"holds for {len(verdicts) - len(behind)} of {len(verdicts)} cases; not for "
                 + ", ".join(behind) + "."))


if __name__ == "__main__":
    main()
