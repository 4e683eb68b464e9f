"""kforge against random search at equal trial counts, from a TritonBench-G campaign's committed runs.

For each operator with both arms' trials (runs/<op>/kforge.jsonl and random.jsonl, by sequence), and each
trial count k that both arms reached: the ratio of random's best ok time over its first k trials to
kforge's over its first k (> 1: kforge's best is faster). The table gives, per k, the operators
compared, the median ratio, and how many have one arm's best more than 2% faster than the other's
(report.clearly_faster's rule; the arms' times come from different runs of the same search timing, so
ratios within a few percent are noise).

    PYTHONPATH=python .venv/bin/python -m kforge.tritonbench_g.anytime experiments/tritonbench-g/h200

Both arms start from the original's configuration; kforge's default strategy (hybrid) then draws its
first ``initial_samples`` (10) configurations uniformly, as random search does, so below about 11
trials the two differ only by their draws.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Iterable

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kforge.tritonbench_g.report import ReportError, clearly_faster, read_trials, timed_ok  # noqa: E402

COUNTS = (5, 10, 20, 40, 80)


def best_of_first(trials: list[dict], k: int) -> float | None:
    """The fastest ok time among the first ``k`` trials (None: none of them is ok)."""
    times = [float(t["time_ms"]) for t in trials[:k] if timed_ok(t)]
    return min(times) if times else None


def ratios_of(pairs: Iterable[tuple[list[dict] | None, list[dict] | None]],
              counts: tuple[int, ...] = COUNTS) -> dict[int, list[float]]:
    """Per trial count k: random's best over kforge's best, for each (kforge trials, random trials) pair
    (in sequence order) whose two arms both ran at least k trials and both have an ok one among them."""
    out: dict[int, list[float]] = {k: [] for k in counts}
    for kforge, random in pairs:
        if not kforge or not random:
            continue
        for k in counts:
            if min(len(kforge), len(random)) < k:
                continue
            a, b = best_of_first(kforge, k), best_of_first(random, k)
            if a and b:
                out[k].append(b / a)
    return out


def ratios(runs: Path, counts: tuple[int, ...] = COUNTS) -> dict[int, list[float]]:
    """``ratios_of`` over the operator folders of a campaign's runs/."""
    return ratios_of(((read_trials(d, "kforge"), read_trials(d, "random"))
                      for d in sorted(p for p in runs.iterdir() if p.is_dir())), counts)


def table(by_count: dict[int, list[float]]) -> list[str]:
    lines = ["| trials | operators | median random best / kforge best | kforge faster (> 2%) | kforge slower (> 2%) |",
             "|---|---|---|---|---|"]
    for k, r in by_count.items():
        if r:
            faster = sum(clearly_faster(x, 1.0) for x in r)  # random's best time more than 2% above kforge's
            slower = sum(clearly_faster(1.0, x) for x in r)  # kforge's more than 2% above random's
            lines.append(f"| {k} | {len(r)} | {statistics.median(r):.3f} | {faster} | {slower} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("campaign", help="the campaign folder (experiments/tritonbench-g/h200)")
    a = ap.parse_args(argv)
    runs = Path(a.campaign) / "runs"
    if not runs.is_dir():
        print(f"{runs}: the campaign has no runs folder", file=sys.stderr)
        return 2
    try:
        print("\n".join(table(ratios(runs))))
    except ReportError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
