"""Takes a campaign chunk's runs into the committed campaign folder, after a look at each (issue 12).

    python -m kforge.tritonbench_g.accept RUNS.tgz --into experiments/tritonbench-g/h200 [--skip a,b] [--dry-run]

RUNS.tgz is what ``scripts/device-tritonbench-g search`` returns (``runs/<op>/``: kforge.jsonl,
random.jsonl, final.json, search.log, *.wall_s). Per operator it prints one row: the card, the kforge
trials (ok / all, and compile timeouts: candidates past ``compile_timeout_s``), the random trials, whether
final.json exists and which candidates are correct, and the verdict of this command:

- ``take``: copied into ``<into>/runs/<op>/`` (replacing what was there);
- ``skip (asked)``: named by ``--skip`` (e.g. a search starved for a reason the campaign does not judge);
- ``skip (no final.json)``: the final measurement did not run, so there is no result to judge;
- ``skip (committed)``: the campaign already holds a final.json for it (``--replace`` takes it anyway);
- ``take (again)``: the campaign holds a final.json for it and marked it to be searched again
  (``redo.jsonl``: ``{"op", "reason", "date"}``, a fault fixed since its search): the committed run moves
  to ``<into>/superseded/<op>/<n>/`` (kept beside the new one, with the record as ``redo.json``, not in
  the report's numbers) and the operator leaves redo.jsonl;
- ``skip (machine path)``: a file still holds an absolute path of the GPU machine (``/tmp/``,
  ``/work/``, ``/root/``); the search script removes them, so this means an older script.

Operators the search script set aside without a verdict (out of GPU memory alone, or a final measurement
past its time limit: ``set-aside.jsonl``
beside RUNS.tgz) are merged into ``<into>/set-aside.jsonl`` (the report lists them) until the campaign
holds a final.json for them.

Nothing is judged automatically beyond that: trial counts differ by kernel (a cheap one makes about 100
in 30 s, an attention kernel a few dozen), so the rows are for the person committing to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

SET_ASIDE = "set-aside.jsonl"
# Why the search script set an operator aside without a verdict (a record's ``reason``).
SET_ASIDE_REASONS = {"out_of_memory": "out of GPU memory",
                     "measure_timeout": "the final measurement ran past its time limit"}

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kforge.tritonbench_g.order import REDO, RedoError, read_redo  # noqa: E402
from kforge.tritonbench_g.report import compile_timeouts, read_jsonl, read_trials  # noqa: E402

MACHINE_PATHS = ("/tmp/", "/work/", "/root/")


def trial_counts(folder: str, method: str) -> tuple[int, int, int] | None:
    """(ok, all, compile timeouts) of a method's exported run, or None without the file."""
    trials = read_trials(Path(folder), method)
    if trials is None:
        return None
    return sum(t["status"] == "ok" for t in trials), len(trials), compile_timeouts(trials)


def machine_path_in(folder: str) -> str | None:
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for p in MACHINE_PATHS:
            if p in text:
                return f"{name}: {p}"
    return None


def describe(folder: str) -> dict:
    """What a person needs to see of one operator's runs before committing them."""
    final_path = os.path.join(folder, "final.json")
    final = json.load(open(final_path, encoding="utf-8")) if os.path.exists(final_path) else None
    row = {"op": os.path.basename(folder), "gpu": (final or {}).get("gpu", "?"),
           "kforge": trial_counts(folder, "kforge"),
           "random": trial_counts(folder, "random"),
           "final": final is not None,
           "correct": {k: bool(c.get("correct")) for k, c in (final or {}).get("candidates", {}).items()},
           "machine_path": machine_path_in(folder)}
    return row


def verdict(row: dict, committed: bool, skip: set, replace: bool, again: bool = False) -> str:
    if row["op"] in skip:
        return "skip (asked)"
    if not row["final"]:
        return "skip (no final.json)"
    if committed and not (replace or again):
        return "skip (committed)"
    if row["machine_path"]:
        return "skip (machine path)"
    return "take (again)" if committed and again else "take"


def supersede(runs_dir: str, op: str, record: dict) -> str:
    """Moves the committed run of ``op`` to ``superseded/<op>/<n>/`` beside ``runs_dir`` (n: 1, 2, ...) with
    the redo ``record`` as redo.json; returns the new folder."""
    base = os.path.join(os.path.dirname(runs_dir), "superseded", op)
    n = 1
    while os.path.exists(os.path.join(base, str(n))):
        n += 1
    target = os.path.join(base, str(n))
    os.makedirs(base, exist_ok=True)
    shutil.move(os.path.join(runs_dir, op), target)
    with open(os.path.join(target, "redo.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return target


def counts_text(c: tuple[int, int, int] | None) -> str:
    return "-" if c is None else f"{c[0]}/{c[1]}" + (f" ({c[2]} compile timeouts)" if c[2] else "")


def setup_memory_gib(folder: str, method: str) -> tuple[float, float] | None:
    """(held after the setup, peak during it) in GiB, the largest over a run's workers (each reports its
    setup in the metrics of its first answer), or None where no worker reported it."""
    held = [(m["setup.gpu_reserved_gib"], m["setup.gpu_reserved_peak_gib"])
            for m in (t.get("metrics") or {} for t in read_trials(Path(folder), method) or [])
            if "setup.gpu_reserved_gib" in m and "setup.gpu_reserved_peak_gib" in m]
    return (max(h for h, _ in held), max(p for _, p in held)) if held else None


SETUP_PARTS = ("setup.worker_start_s", "setup.inputs_s", "setup.reference_s")


def setup_seconds(folder: str, method: str) -> tuple[float, float] | None:
    """(setup seconds, profiler-start seconds) of a run's slowest worker, or None where no worker reported
    its setup. The setup is the worker's start, inputs and reference, and of the profiler's start what
    the setup did not hide (setup.profiler_wait_s; all of setup.profiler_s in runs made before the start
    ran beside the setup)."""
    per_worker = []
    for m in (t.get("metrics") or {} for t in read_trials(Path(folder), method) or []):
        if not all(k in m for k in SETUP_PARTS):
            continue
        profiler = m.get("setup.profiler_s", 0.0)
        per_worker.append((sum(m[k] for k in SETUP_PARTS) + m.get("setup.profiler_wait_s", profiler), profiler))
    return max(per_worker) if per_worker else None


def trials_line(folder: str) -> str:
    """One operator's trial counts for the search script's per-operator line (read before committing), and
    the GPU memory a kforge worker held (what bounds the workers per GPU)."""
    def arm(method: str) -> str:
        c = trial_counts(folder, method)
        if c is None:
            return f"no {method} run"
        timeouts = f", {c[2]} compile timeouts" if method == "kforge" else ""
        return f"{c[1]} {method} trials ({c[0]} ok){timeouts}"
    memory = setup_memory_gib(folder, "kforge")
    held = f"; a kforge worker held {memory[0]:.1f} GiB after its setup ({memory[1]:.1f} at most)" if memory else ""
    setup = setup_seconds(folder, "kforge")
    took = f"; the slowest kforge setup took {setup[0]:.1f} s (profiler start {setup[1]:.1f} s)" if setup else ""
    return f"{arm('kforge')}; {arm('random')}{held}{took}"


def accept(archive: str, into: str, skip: set, replace: bool = False, dry_run: bool = False,
           out=sys.stdout) -> list[dict]:
    runs_dir = os.path.join(into, "runs")
    redo_path = Path(into) / REDO
    redo = {r["op"]: r for r in read_redo(str(redo_path))}
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        chunk = os.path.join(tmp, "runs")
        if not os.path.isdir(chunk):
            raise SystemExit(f"{archive}: no runs/ folder inside")
        rows, moved = [], []
        print("| op | card | kforge ok/all | random ok/all | final.json | correct | verdict |", file=out)
        print("|---|---|---|---|---|---|---|", file=out)
        for op in sorted(os.listdir(chunk)):
            folder = os.path.join(chunk, op)
            if not os.path.isdir(folder):
                continue
            row = describe(folder)
            committed = os.path.exists(os.path.join(runs_dir, op, "final.json"))
            row["verdict"] = verdict(row, committed, skip, replace, op in redo)
            rows.append(row)
            correct = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in row["correct"].items()) or "-"
            note = f": {row['machine_path']}" if row["verdict"] == "skip (machine path)" else ""
            print(f"| {op} | {row['gpu']} | {counts_text(row['kforge'])} | {counts_text(row['random'])} | "
                  f"{'yes' if row['final'] else 'no'} | {correct} | {row['verdict']}{note} |", file=out)
            if row["verdict"].startswith("take") and not dry_run:
                target = os.path.join(runs_dir, op)
                record = redo.pop(op, None)  # searched again, or a first verdict for one marked: done
                if record is not None and committed:
                    moved.append(f"{op}: the committed run moved to {supersede(runs_dir, op, record)}")
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(folder, target)
        for line in moved:  # after the table, which a line inside would break
            print(line, file=out)
        if not dry_run and redo_path.exists():
            redo_path.write_text("".join(json.dumps(r) + "\n" for r in redo.values()), encoding="utf-8")
        unknown = skip - {r["op"] for r in rows}
        if unknown:
            print(f"note: --skip names operators not in the archive: {', '.join(sorted(unknown))}", file=out)
    merge_set_aside(Path(archive).with_name(SET_ASIDE), Path(into), dry_run, out)
    return rows


def merge_set_aside(source: Path, into: Path, dry_run: bool = False, out=sys.stdout) -> list[dict]:
    """The campaign's record of operators set aside without a verdict (``<into>/set-aside.jsonl``: one out
    of GPU memory alone, or whose final measurement ran past its limit, on a card, with so many workers), merged with the chunk's (``set-aside.jsonl``
    beside its runs.tgz, written by the search script): one record per (operator, card, workers), the
    newest kept; an operator the campaign now holds a final.json for leaves the record. Returns it."""
    def read(path: Path) -> list[dict]:
        return read_jsonl(path) if path.exists() else []

    def key(r: dict) -> tuple:
        return r["op"], r["gpu"], r["workers"]

    target = into / SET_ASIDE
    chunk = read(source)
    records = {key(r): r for r in read(target) + chunk}
    kept = [r for _, r in sorted(records.items()) if not (into / "runs" / r["op"] / "final.json").exists()]
    for r in kept:
        if key(r) in {key(c) for c in chunk}:
            print(f"set aside (no verdict): {r['op']}: {SET_ASIDE_REASONS.get(r.get('reason'), r.get('reason'))} on "
                  f"{r['gpu']} ({r['memory_mib']} MiB) with {r['workers']} workers", file=out)
    if not dry_run and (kept or target.exists()):
        target.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    return kept


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archive", help="runs.tgz from scripts/device-tritonbench-g search")
    ap.add_argument("--into", required=True, help="the campaign folder (experiments/tritonbench-g/h200)")
    ap.add_argument("--skip", default="", help="operators not to take, comma-separated")
    ap.add_argument("--replace", action="store_true", help="take operators the campaign already holds")
    ap.add_argument("--dry-run", action="store_true", help="print the rows, copy nothing")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.into):
        print(f"--into {a.into}: no such folder", file=sys.stderr)
        return 2
    skip = {s.strip() for s in a.skip.split(",") if s.strip()}
    try:
        rows = accept(a.archive, a.into, skip, a.replace, a.dry_run)
    except RedoError as e:
        print(f"kforge.tritonbench_g.accept: {e}", file=sys.stderr)
        return 2
    taken = sum(r["verdict"].startswith("take") for r in rows)
    print(f"{taken} of {len(rows)} operators {'would be ' if a.dry_run else ''}taken into {a.into}/runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
