#!/usr/bin/env python3
"""The race's table and plot (issue 10, item 7), from what scripts/device-t1 b brought back.

Every tool's evaluations are scored by ONE yardstick: the time kforge's brute force measured for that
configuration on the same GPU (the recording; median of L2-flushed runs), so that Kernel Tuner's own
timer (mean of 32 runs, no flush) and kforge's do not enter the comparison. A tool's curve at wall time t
is the recorded time of the best configuration it had evaluated by t; evaluations after the race's time
limit are not counted.

  python3 python/race_report.py --recording convolution-h200-cache.json --race race.json \
      --limit 75 --plot docs/race-convolution-h200.png > table.md
"""
import argparse
import gzip
import json
import math


def load_recording(path):
    """{config key (values in tune_params_keys order): recorded time in ms} of the correct configurations,
    and {config key: status} of the others (InvalidConfig: cannot launch; CompileFailedConfig; ...)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        d = json.load(f)
    keys = d["tune_params_keys"]
    times, failed = {}, {}
    for rec in d["cache"].values():
        t = rec.get("time_median", rec.get("time"))
        key = tuple(rec[k] for k in keys)
        if isinstance(t, (int, float)) and math.isfinite(t):
            times[key] = float(t)
        else:
            failed[key] = str(rec.get("time"))
    return keys, times, failed


def phantoms(evaluations, keys, failed, limit):
    """Evaluations a tool reported with a time whose configuration the recording has as failed (it cannot
    launch or does not compile on this GPU): the tool timed something that did not run."""
    return [e for e in evaluations if e["t_s"] <= limit and e.get("error") is None and e.get("time_ms") is not None
            and tuple(e["config"][k] for k in keys) in failed]


def trace(evaluations, keys, times, limit):
    """[(t_s, best recorded time so far)] at every improvement, evaluations up to `limit` seconds."""
    out, best = [], math.inf
    for e in sorted(evaluations, key=lambda e: e["t_s"]):
        if e["t_s"] > limit:
            break
        if e.get("error") is not None:
            continue
        t = times.get(tuple(e["config"][k] for k in keys))
        if t is not None and t < best:
            best = t
            out.append((e["t_s"], t))
    return out


def time_to(tr, target):
    for t, v in tr:
        if v <= target:
            return t
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recording", required=True)
    ap.add_argument("--race", required=True)
    ap.add_argument("--limit", type=float, required=True, help="the race's wall time per tool (s)")
    ap.add_argument("--plot")
    args = ap.parse_args()
    keys, times, failed = load_recording(args.recording)
    opt = min(times.values())
    race = json.load(open(args.race))
    tools = [("kforge hybrid (default)", race["kforge"])]
    tools += [(f"Kernel Tuner {s}", r) for s, r in race["kernel_tuner"].items() if "evaluations" in r]
    traces = {name: trace(r["evaluations"], keys, times, args.limit) for name, r in tools}
    rows = []
    for name, r in tools:
        ev = [e for e in r["evaluations"] if e["t_s"] <= args.limit]
        tr = traces[name]
        final = tr[-1][1] if tr else math.nan
        own = min((e["time_ms"] for e in ev if e.get("error") is None and e.get("time_ms") is not None),
                  default=math.nan)
        rows.append((name, len(ev), len(ev) / args.limit, final, final / opt, time_to(tr, opt * 1.05),
                     time_to(tr, opt * 1.01), own, len(phantoms(ev, keys, failed, args.limit))))
    print(f"Optimum of the space on this GPU (kforge brute force, {len(times)} correct configurations): "
          f"{opt:.4f} ms\n")
    print("| tool | evaluations | evaluations/s | best found (ms, recorded) | best / optimum | time to 5% | "
          "time to 1% | its own best (ms) | timed but cannot run |")
    print("|---|---|---|---|---|---|---|---|---|")
    fmt = lambda t: "-" if t is None else f"{t:.1f} s"
    for name, n, rate, final, ratio, t5, t1, own, bad in rows:
        print(f"| {name} | {n} | {rate:.2f} | {final:.4f} | {ratio:.3f} | {fmt(t5)} | {fmt(t1)} | {own:.4f} | {bad} |")
    # When kforge first matched each Kernel Tuner strategy's final best.
    kf = traces[tools[0][0]]
    print()
    for name, _, _, final, *_ in rows[1:]:
        t_kt = time_to(traces[name], final)
        t_kf = time_to(kf, final)
        speed = f"{t_kt / t_kf:.1f}x sooner" if t_kf and t_kt else "-"
        print(f"- {name}'s final best ({final:.4f} ms): Kernel Tuner at {fmt(t_kt)}, kforge at {fmt(t_kf)} ({speed})")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.2))
        for name, tr in traces.items():
            if not tr:
                continue
            xs = [t for t, _ in tr] + [args.limit]
            ys = [v / opt for _, v in tr] + [tr[-1][1] / opt]
            ax.step(xs, ys, where="post", label=name)
        ax.axhline(1.01, color="grey", lw=0.8, ls=":")
        ax.axhline(1.05, color="grey", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("best found / brute-force optimum")
        ax.set_title("benchmark_hub convolution on one H200: best found against wall time")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=130)


if __name__ == "__main__":
    main()
