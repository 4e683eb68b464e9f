"""Which operators a search call takes, in order (scripts/device-tritonbench-g: `search` on the GPU machine,
`next` here before a call).

    python -m kforge.tritonbench_g.order RUNNABLE INDEX [--set-aside FILE] [--redo FILE] [--runs DIR] [--first N]

The runnable operators (RUNNABLE: runnable.jsonl) that the importer made ready (INDEX: its index.json), in
operator order: first those without a verdict; then those the campaign marked to be searched again
(``--redo``: redo.jsonl, a fault fixed since their search), in the file's order (most worth it first);
last those it set aside without a verdict
(``--set-aside``: set-aside.jsonl, out of GPU memory or a final measurement past its limit), so a call
spends its minutes on new verdicts before replacing old ones, and on both before retries. ``--runs``: the
campaign's runs folder; an operator with a final.json there is left out unless it is to be searched
again (what `next` shows: the search skips it as it goes). Prints the names on one line; with
``--first N``, the first N and how many there are in all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def listed(path: str | None) -> set[str]:
    """The operators a campaign record (set-aside.jsonl, redo.jsonl) names; none where it does not exist."""
    return {r["op"] for r in read_jsonl(path)} if path and os.path.exists(path) else set()


def search_order(runnable: str, index: str, set_aside: str | None = None, runs: str | None = None,
                 redo: str | None = None) -> list[str]:
    """The operators a search takes, in the order it takes them (module docstring)."""
    with open(index, encoding="utf-8") as f:
        ready = {r["op"] for r in json.load(f) if r["status"] == "ready"}
    aside, again = listed(set_aside), listed(redo)
    rank = {op: i for i, op in enumerate(dict.fromkeys(r["op"] for r in read_jsonl(redo)))} if again else {}
    ops = [r["op"] for r in read_jsonl(runnable) if r["runnable"] and r["op"] in ready]
    if runs:
        ops = [op for op in ops if op in again or not os.path.exists(os.path.join(runs, op, "final.json"))]
    # stable: operator order within the first and the last group; those to search again in redo.jsonl's order
    return sorted(ops, key=lambda op: (op in aside, op in again, rank.get(op, 0) if op not in aside else 0))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runnable", help="runnable.jsonl")
    ap.add_argument("index", help="the importer's index.json")
    ap.add_argument("--set-aside", help="set-aside.jsonl (those after the others)")
    ap.add_argument("--redo", help="redo.jsonl (operators searched again though they have a final.json)")
    ap.add_argument("--runs", help="the campaign's runs folder (operators with a final.json left out)")
    ap.add_argument("--first", type=int, help="print the first N and the count")
    a = ap.parse_args(argv)
    ops = search_order(a.runnable, a.index, a.set_aside, a.runs, a.redo)
    if a.first is None:
        print(" ".join(ops))
    else:
        aside, again = listed(a.set_aside), listed(a.redo)
        n_aside = sum(op in aside for op in ops)
        n_again = sum(op in again and op not in aside for op in ops)
        print(f"{len(ops)} operators to search ({len(ops) - n_aside - n_again} without a verdict, {n_again} to "
              f"search again, {n_aside} set aside); the next {min(a.first, len(ops))}: {' '.join(ops[:a.first])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
