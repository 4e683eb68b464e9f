#!/usr/bin/env python3
"""Run Kernel Tuner's strategies in simulation mode on the six benchmark_hub spaces and write the order in
which each run visited configurations, for kforge's scorer (`kforge score` with `external:`; issue 5).

Kernel Tuner (PyPI `kernel_tuner`) replays the same recorded cache files kforge replays. Each run gets a
simulated-time limit a little above kforge's budget for the space (1.1 x the 0.95 cutoff, computed the
same way); kforge truncates every trace at its own budget when scoring, so both tools are cut at the same
simulated time by the same clock (the recorded compile + verification + benchmark + framework times).

Usage: python3 python/kt_compare.py --data ../shared/data/tuning-spaces --seeds 10 --out kt_runs.json
"""
import argparse, gzip, json, math, os, random, sys, tempfile, time, warnings

import numpy as np

STRATEGIES = ["random_sample", "genetic_algorithm", "bayes_opt", "dual_annealing", "greedy_ils", "simulated_annealing"]
SPACES = [(k, g) for k in ("convolution", "dedispersion") for g in ("A100", "A4000", "MI250X")]


def budget_seconds(cache):
    """kforge's budget: 1.1 x the time random search needs to reach the 0.95 cutoff (docs/scoring.md)."""
    perf, totals = [], []
    for rec in cache.values():
        total = sum(rec.get(k, 0) or 0 for k in ("compile_time", "verification_time", "benchmark_time",
                                                  "framework_time", "strategy_time")) / 1e3
        totals.append(total)
        if not isinstance(rec.get("time"), str) and "times" in rec:
            perf.append(float(np.median(rec["times"])))
    perf.sort()
    opt, med = perf[0], float(np.median(perf))
    target = opt + (med - opt) * (1 - 0.95)
    desc = perf[::-1]
    i = next(k for k, v in enumerate(desc) if v <= target)
    fevals = math.ceil(i / (len(desc) + 1 - i))
    return 1.1 * fevals * float(np.median(totals))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data/tuning-spaces")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--out", default="kt_runs.json")
    ap.add_argument("--bo-max-fevals", type=int, default=1000,
                    help="cap on bayes_opt's evaluations per run (its cost grows cubically with them: ten "
                         "uncapped runs on dedispersion/A100, ~4000 evaluations each, had not finished "
                         "after 55 minutes)")
    args = ap.parse_args()
    import kernel_tuner
    from kernel_tuner import tune_kernel
    warnings.filterwarnings("ignore")
    out = {"kernel_tuner_version": kernel_tuner.__version__, "runs": {}}
    if os.path.exists(args.out):  # resume: keep every (space, strategy) already written
        out = json.load(open(args.out))
    tmp = tempfile.mkdtemp(prefix="kt-compare-")
    for kernel, gpu in SPACES:
        folder = os.path.join(args.data, "benchmark_hub", kernel)
        d = json.load(gzip.open(os.path.join(folder, gpu + ".json.gz")))
        t1 = json.load(open(os.path.join(folder, "T1.json")))
        restrictions = [c["Expression"] for c in t1["ConfigurationSpace"]["Conditions"]]
        tune_params = {k: d["tune_params"][k] for k in d["tune_params_keys"]}
        limit = 1.3 * budget_seconds(d["cache"])
        name = f"{kernel}/{gpu}"
        for strategy in args.strategies.split(","):
            if len(out["runs"].get(name, {}).get("kt." + strategy, [])) >= args.seeds:
                continue
            runs = []
            t0 = time.time()
            for seed in range(args.seeds):
                cache = os.path.join(tmp, f"{kernel}_{gpu}_{strategy}_{seed}.json")
                json.dump(d, open(cache, "w"))  # Kernel Tuner may append to its cache: a fresh copy per run
                random.seed(seed)
                np.random.seed(seed)
                # The simulated-time limit is the budget, as for kforge: no evaluation cap, and random_sample
                # may draw the whole space (its default stops after 10% of it; bayes_opt's after 100).
                options = {"time_limit": limit, "max_fevals": 10**9}
                if strategy == "random_sample":
                    options["fraction"] = 1.0
                if strategy == "bayes_opt":
                    options["max_fevals"] = args.bo_max_fevals
                res, env = tune_kernel(d["kernel_name"], "__global__ void k(){}", d["problem_size"], [], tune_params,
                                       strategy=strategy, strategy_options=options,
                                       cache=cache, simulation_mode=True, restrictions=restrictions,
                                       verbose=False, quiet=True)
                seen, keys = set(), []
                for r in res:
                    key = ",".join(str(r[k]) for k in d["tune_params_keys"])
                    if key not in seen:
                        seen.add(key)
                        keys.append(key)
                runs.append(keys)
                os.remove(cache)
            out["runs"].setdefault(name, {})["kt." + strategy] = runs
            with open(args.out + ".tmp", "w") as f:  # written after every strategy, so a stop loses little
                json.dump(out, f)
            os.replace(args.out + ".tmp", args.out)
            print(f"{name:22s} {strategy:20s} {args.seeds} runs, {np.mean([len(r) for r in runs]):7.1f} configurations"
                  f" per run, {time.time() - t0:6.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
