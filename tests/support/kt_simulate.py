#!/usr/bin/env python3
"""Loads a Kernel Tuner cache file with Kernel Tuner's own reader and replays it in simulation mode
(kernel_tuner.tune_cache, brute force over the recorded configurations), then prints one JSON line:
{"kernel_tuner": VERSION, "evaluated": N, "best": {param: value, ...}, "best_time": ms}.

Exit status 3 when kernel_tuner cannot be imported (the caller skips), 1 on any other failure.

Usage: python3 tests/support/kt_simulate.py CACHE.json
"""
import json
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import kernel_tuner
    except ImportError as e:
        print(f"kernel_tuner is not importable: {e}", file=sys.stderr)
        return 3
    results, _env = kernel_tuner.tune_cache(sys.argv[1], strategy="brute_force", quiet=True)
    keys = kernel_tuner.util.read_cache(sys.argv[1], open_cache=False)["tune_params_keys"]
    ok = [r for r in results if r and "__error__" not in r and isinstance(r.get("time"), (int, float))]
    if not ok:
        print("no configuration without an error", file=sys.stderr)
        return 1
    best = min(ok, key=lambda r: r["time"])
    print(json.dumps({"kernel_tuner": kernel_tuner.__version__ if hasattr(kernel_tuner, "__version__") else "?",
                      "evaluated": len(ok),
                      "best": {k: best[k] for k in keys},
                      "best_time": best["time"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
