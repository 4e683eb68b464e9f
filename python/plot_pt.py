#!/usr/bin/env python3
"""Plot the P(t) curves of a `kforge score --json` file: one panel per space, one line per strategy, and
a last panel with every strategy's curve averaged over the spaces (time as a fraction of each space's
range, so that spaces with different budgets can be averaged).

Usage: python3 python/plot_pt.py SCORE.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    d = json.load(open(sys.argv[1]))
    spaces, strategies = d["spaces"], d["strategies"]
    cells = {(c["space"], c["strategy"]): c for c in d["cells"]}
    cols = 4
    rows = (len(spaces) + 1 + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    styles = {s: ("-" if not s.startswith("kt.") else "--") for s in strategies}
    for i, sp in enumerate(spaces):
        ax = axes[i // cols][i % cols]
        for st in strategies:
            c = cells.get((sp, st))
            if c:
                ax.plot(c["time_range_s"], c["p_curve"], styles[st], label=f"{st} ({c['score']:.2f})", lw=1.2)
        ax.set_title(sp, fontsize=10)
        ax.set_xlabel("simulated time (s)", fontsize=8)
        ax.set_ylabel("P(t)", fontsize=8)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_ylim(-1.0, 1.05)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower right")
    ax = axes[len(spaces) // cols][len(spaces) % cols]
    for st in strategies:
        curves = [np.asarray(cells[(sp, st)]["p_curve"]) for sp in spaces if (sp, st) in cells]
        if len(curves) == len(spaces):
            mean = np.mean(curves, axis=0)
            ax.plot(np.linspace(0, 1, len(mean)), mean, styles[st], label=f"{st} ({np.mean([cells[(sp, st)]['score'] for sp in spaces]):.2f})", lw=1.2)
    ax.set_title("mean over the spaces", fontsize=10)
    ax.set_xlabel("fraction of each space's time range", fontsize=8)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_ylim(-1.0, 1.05)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6, loc="lower right")
    for j in range(len(spaces) + 1, rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
