#!/usr/bin/env python3
"""Plot the convergence of kforge runs: the best time so far against the trials and against the run's
clock, every run on the same two axes. The input is what `kforge report RUN... --plot OUT.png` writes:

  {"runs": [{"label": "...", "points": [{"trials": n, "clock_s": s, "best_ms": ms}, ...]}, ...]}

where the points are in arrival order (best_ms is null until a trial ran correctly).

Usage: python3 python/plot_convergence.py CONVERGENCE.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def steps(points, x_key):
    """The (x, best) pairs of the points where a best is known."""
    xs, ys = [], []
    for p in points:
        if p["best_ms"] is not None:
            xs.append(p[x_key])
            ys.append(p["best_ms"])
    return xs, ys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        runs = json.load(f)["runs"]
    fig, (by_trials, by_clock) = plt.subplots(1, 2, figsize=(11, 4.2))
    for run in runs:
        for ax, key in ((by_trials, "trials"), (by_clock, "clock_s")):
            xs, ys = steps(run["points"], key)
            if xs:
                ax.step(xs, ys, where="post", label=run["label"], lw=1.3)
    by_trials.set_xlabel("trials (in arrival order)")
    by_clock.set_xlabel("run clock (s; simulated on replay)")
    for ax in (by_trials, by_clock):
        ax.set_ylabel("best time so far (ms)")
        ax.grid(True, lw=0.3)
        if runs:
            ax.legend(fontsize=7)
    fig.suptitle("convergence")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
