"""A kforge run's summary for the suite's results (scripts/device-suite).

    python -m kforge.suite.search TRIALS.jsonl RUN_FOLDER --budget-s 300 --out search.json --best best.json

TRIALS.jsonl is ``kforge export RUN_FOLDER --format jsonl``; RUN_FOLDER/run.sqlite holds the run's meta
(the strategy, the seed, how it ended and the evaluator's setup seconds). search.json: trials, statuses, the
best ok trial (its configuration, its time in the run, its sequence number, ``found_at_s``: seconds from the
start of ``kforge run`` including the evaluator's setup), the run's wall clock, the strategy and seed.
best.json: the best configuration alone (what ``kforge render --config @best.json`` takes). Exit 1 with a
message when the run has no ok trial (no best.json is written), 2 when a file is unreadable.
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path


def read_trials(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
    return rows


def read_meta(run: Path) -> dict:
    """The run store's meta table, each value parsed as JSON where it is JSON ({} without a store)."""
    db = run / "run.sqlite"
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out = {}
        for key, value in con.execute("select key, value from meta"):
            try:
                out[key] = json.loads(value)
            except (TypeError, json.JSONDecodeError):
                out[key] = value
        return out
    finally:
        con.close()


def summarise(rows: list[dict], meta: dict, budget_s: float | None = None) -> dict:
    """The summary of a run's exported trials and its meta (layout: the module's docstring)."""
    end = meta.get("finished") or meta.get("interrupted") or {}
    end = end if isinstance(end, dict) else {}
    setup = float(end.get("setup_s", 0.0) or 0.0)
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    ok = [r for r in rows if r["status"] == "ok"]
    best = min(ok, key=lambda r: (r["time_ms"], r["sequence"])) if ok else None
    run = meta.get("run") if isinstance(meta.get("run"), dict) else {}
    strategy = run.get("strategy") if isinstance(run.get("strategy"), dict) else {}
    failed = meta.get("failed")
    out = {
        "trials": len(rows),
        "statuses": dict(sorted(statuses.items())),
        "setup_s": setup,
        "wall_s": max((r["clock_s"] for r in rows), default=0.0) + setup,
        "budget_s": budget_s,
        "strategy": strategy.get("type"),
        "strategy_params": strategy.get("params"),
        "seed": run.get("seed"),
        "ended": "finished" if meta.get("finished") else "interrupted" if meta.get("interrupted")
        else "failed" if failed else None,
        "end_reason": end.get("reason"),
        "error": failed.get("error") if isinstance(failed, dict) else None,
        "best": None,
    }
    if best is not None:
        out["best"] = {"configuration": best["configuration"], "time_ms_in_run": best["time_ms"],
                       "sequence": best["sequence"], "clock_s": best["clock_s"],
                       "found_at_s": best["clock_s"] + setup}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trials", type=Path)
    ap.add_argument("run", type=Path)
    ap.add_argument("--budget-s", type=float)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--best", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        rows = read_trials(args.trials)
        meta = read_meta(args.run)
    except (OSError, ValueError, sqlite3.Error) as e:
        print(f"kforge.suite.search: {e}", file=sys.stderr)
        return 2
    s = summarise(rows, meta, args.budget_s)
    args.out.write_text(json.dumps(s, indent=1, sort_keys=True) + "\n")
    if s["best"] is None:
        print(f"kforge.suite.search: no ok trial among {s['trials']} {s['statuses']}", file=sys.stderr)
        return 1
    args.best.write_text(json.dumps(s["best"]["configuration"]) + "\n")
    b = s["best"]
    print(f"{s['trials']} trials {s['statuses']}; best {b['time_ms_in_run']:.4f} ms at {b['found_at_s']:.0f} s "
          f"(trial {b['sequence']}): {json.dumps(b['configuration'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
