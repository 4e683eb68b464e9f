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


REDO = "redo.jsonl"  # the campaign's operators to search again (read_redo)


def listed(path: str | None) -> set[str]:
    """The operators a campaign record (set-aside.jsonl, redo.jsonl) names; none where it does not exist."""
    return {r["op"] for r in read_jsonl(path)} if path and os.path.exists(path) else set()


def json_objects(path: str, error: type[Exception] = ValueError) -> list[tuple[int, dict]]:
    """(line number, object) for each non-blank line of the JSON Lines file ``path``; ``error`` naming the
    file and line for a line that is not a JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror or e})") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise error(f"{path}:{number}: malformed JSON line: {e}") from None
        if not isinstance(record, dict):
            raise error(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        records.append((number, record))
    return records


def read_jsonl(path: str) -> list[dict]:
    """The objects of a JSON Lines file (json_objects)."""
    return [record for _, record in json_objects(path)]


class RedoError(ValueError):
    """redo.jsonl is malformed; the message names the file, the line and the reason."""


REDO_KEYS = {"op": "the operator to search again", "reason": "why: the fault fixed since its search",
             "date": "when it was marked (YYYY-MM-DD)"}


def read_redo(path: str) -> list[dict]:
    """redo.jsonl's records in the file's order (the order the search takes them): one JSON object per
    line with ``op`` and ``reason`` (non-empty strings) and an optional ``date``; RedoError for another
    key, a missing one, or an operator listed twice. None where the file does not exist: an empty list."""
    if not os.path.exists(path):
        return []
    records, seen = [], set()
    for number, record in json_objects(path, RedoError):
        where = f"{path}:{number}"
        unknown = sorted(set(record) - set(REDO_KEYS))
        if unknown:
            raise RedoError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(REDO_KEYS)})")
        for key in ("op", "reason"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                raise RedoError(f"{where}: '{key}' ({REDO_KEYS[key]}) must be a non-empty string")
        if "date" in record and not isinstance(record["date"], str):
            raise RedoError(f"{where}: 'date' must be a string")
        if record["op"] in seen:
            raise RedoError(f"{where}: {record['op']!r} is listed twice")
        seen.add(record["op"])
        records.append(record)
    return records


def search_order(runnable: str, index: str, set_aside: str | None = None, runs: str | None = None,
                 redo: str | None = None) -> list[str]:
    """The operators a search takes, in the order it takes them (module docstring)."""
    with open(index, encoding="utf-8") as f:
        ready = {r["op"] for r in json.load(f) if r["status"] == "ready"}
    aside = listed(set_aside)
    rank = {r["op"]: i for i, r in enumerate(read_redo(redo))} if redo else {}
    again = set(rank)
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
    try:
        ops = search_order(a.runnable, a.index, a.set_aside, a.runs, a.redo)
    except RedoError as e:
        print(f"kforge.tritonbench_g.order: {e}", file=sys.stderr)
        return 2
    if a.first is None:
        print(" ".join(ops))
    else:
        aside, again = listed(a.set_aside), {r["op"] for r in read_redo(a.redo)} if a.redo else set()
        n_aside = sum(op in aside for op in ops)
        n_again = sum(op in again and op not in aside for op in ops)
        print(f"{len(ops)} operators to search ({len(ops) - n_aside - n_again} without a verdict, {n_again} to "
              f"search again, {n_aside} set aside); the next {min(a.first, len(ops))}: {' '.join(ops[:a.first])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
