"""What `start: default` does to a search on the recorded spaces (replay, no GPU): benchmark_hub's
convolution and dedispersion T1 files (their `Default` values) on each recording, `hybrid` and `random`,
with and without `start: default`, seeds 1..SEEDS, EVALS evaluations each. Prints a Markdown table: the
median over seeds of the best time found after 10/25/50/100 evaluations as a fraction of the recording's
optimum (1.00 = the optimum), and the default configuration's own fraction.

    PYTHONPATH=build/python:python .venv/bin/python experiments/start-default/measure.py [SEEDS] [EVALS] [STRATEGIES]

STRATEGIES: a JSON list of strategy specs (a name or {type, params}; default ["hybrid", "random"]).

Reads ../shared/data/tuning-spaces at run time (never copied)."""
import gzip
import json
import os
import statistics
import sys
import tempfile

import kforge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HUB = os.path.join(ROOT, "..", "shared", "data", "tuning-spaces", "benchmark_hub")
SPACES = [(k, g) for k in ("convolution", "dedispersion") for g in ("A100", "A4000", "MI250X")]
MARKS = (10, 25, 50, 100)


def optimum(recording: str) -> float:
    """The fastest recorded configuration by the statistic replay reports (the median of its `times`,
    else its `time`)."""
    cache = json.load(gzip.open(recording))["cache"]
    return min(statistics.median(r["times"]) if r.get("times") else r["time"] for r in cache.values()
               if isinstance(r.get("time"), (int, float)))


def best_after(trials, marks):
    out, best = {}, float("inf")
    for i, t in enumerate(trials, 1):
        if t.ok:
            best = min(best, t.time_ms)
        if i in marks:
            out[i] = best
    return out


def main(seeds: int, evals: int, strategies: list) -> None:
    print(f"| space | strategy | start | " + " | ".join(f"after {m}" for m in MARKS) + " |")
    print("|---|---|---|" + "---|" * len(MARKS))
    with tempfile.TemporaryDirectory() as tmp:
        for kernel, gpu in SPACES:
            recording = os.path.join(HUB, kernel, gpu + ".json.gz")
            best_known = optimum(recording)
            for strategy in strategies:
                for start in (None, "default"):
                    rows = {m: [] for m in MARKS}
                    for seed in range(1, seeds + 1):
                        config = {"problem": {"t1": os.path.join(HUB, kernel, "T1.json")},
                                  "strategy": strategy,
                                  "evaluator": {"type": "replay", "params": {"file": recording}},
                                  "budget": {"evaluations": evals}, "seed": seed}
                        if start:
                            config["start"] = start
                        out = os.path.join(tmp, f"{kernel}-{gpu}-{len(os.listdir(tmp))}")
                        r = kforge.run(config, output=out)
                        if start and seed == 1:
                            first = r.trials[0]
                            default_fraction = best_known / first.time_ms if first.ok else 0.0
                        for m, b in best_after(r.trials, MARKS).items():
                            rows[m].append(best_known / b if b < float("inf") else 0.0)
                    cells = [f"{statistics.median(rows[m]):.3f}" if rows[m] else "-" for m in MARKS]
                    label = f"default ({default_fraction:.3f})" if start else "none"
                    name = strategy if isinstance(strategy, str) else json.dumps(strategy, separators=(",", ":"))
                    print(f"| {kernel}/{gpu} | {name} | {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10, int(sys.argv[2]) if len(sys.argv) > 2 else 100,
         json.loads(sys.argv[3]) if len(sys.argv) > 3 else ["hybrid", "random"])
