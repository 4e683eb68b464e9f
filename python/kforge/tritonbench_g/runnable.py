"""The runnable filter (issue 12, item 2): each TritonBench-G original run once through its speed harness.

    python -m kforge.tritonbench_g.runnable DATA --out runnable.jsonl [--ops a,b] [--jobs 4] [--timeout 180]

Each operator runs in a process of its own (a crash or hang takes only that one): the operator imported
as the harness imports it (kforge.tritonbench_g.harness: cut at its test block), the harness's sweep made
(``get_input_tensors``), then every size moved to the GPU (``to_cuda``) and called once to compile and
once more timed between synchronisations. One JSON line per operator, in operator order:

``{"op", "runnable", "category", "reason", "sizes", "sizes_ok", "seconds", "call_ms": [...]}``

Categories: ``ok``; ``import_error`` (the operator or the harness does not import, e.g. the removed
``triton.ops``); ``triton_api`` (an attribute or signature of Triton 3.1 that 3.6 no longer has);
``compile_error`` (Triton does not compile a kernel); ``runtime_error`` (a call fails on the GPU: an
illegal address, out of memory, a Python error in the wrapper); ``harness_error`` (making the sweep's
inputs fails); ``timeout`` (the process did not finish within ``--timeout`` seconds). An operator is
runnable when every size of its sweep ran.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
import traceback

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def classify(stage: str, error: BaseException) -> str:
    """The category of an error raised while ``stage`` ran (operator, harness or call)."""
    name = type(error).__name__
    text = f"{name}: {error}"
    if isinstance(error, ImportError):
        return "import_error"
    if "Compilation" in name or name in ("CompileTimeAssertionFailure", "OutOfResources"):
        return "compile_error"
    if isinstance(error, (AttributeError, TypeError)) and ("triton" in text or "tl." in text):
        return "triton_api"
    if stage == "operator":
        return "import_error"
    if stage == "harness":
        return "harness_error"
    return "runtime_error"


def run_one(data_dir: str, op: str) -> dict:
    """Runs one operator in this process (the child's side)."""
    from kforge.tritonbench_g.harness import operator
    record = {"op": op, "runnable": False, "category": "ok", "reason": "", "sizes": 0, "sizes_ok": 0,
              "seconds": 0.0, "call_ms": []}
    start = time.perf_counter()
    stage = "operator"
    try:
        import torch
        stage = "harness"
        h = operator(data_dir, op)
        record["sizes"] = len(h.inputs)
        for i, inp in enumerate(h.inputs):
            stage = "harness"
            x = h.perf.to_cuda(inp)
            stage = "call"
            h.perf.call_op(x)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            h.perf.call_op(x)
            torch.cuda.synchronize()
            record["call_ms"].append(round((time.perf_counter() - t0) * 1e3, 4))
            record["sizes_ok"] = i + 1
            del x
        record["runnable"] = record["sizes"] > 0
        if not record["runnable"]:
            record.update(category="harness_error", reason="the harness sweeps no sizes")
    except BaseException as e:  # noqa: BLE001 - every failure is this operator's datum
        at = f"size {record['sizes_ok']}: " if stage == "call" else ""
        record.update(category=classify(stage, e),
                      reason=at + "".join(traceback.format_exception_only(type(e), e)).strip()[-600:])
    record["seconds"] = round(time.perf_counter() - start, 2)
    return record


def run_isolated(data_dir: str, op: str, timeout: float) -> dict:
    """Runs one operator in a child process; a hang is a ``timeout`` record, a crash a ``runtime_error``."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "kforge.tritonbench_g.runnable", data_dir, "--one", op],
                           capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"op": op, "runnable": False, "category": "timeout", "reason": f"did not finish in {timeout:g} s",
                "sizes": 0, "sizes_ok": 0, "seconds": round(time.perf_counter() - start, 2), "call_ms": []}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{") and '"op"' in line:
            return json.loads(line)
    return {"op": op, "runnable": False, "category": "runtime_error",
            "reason": f"the process exited {p.returncode} without a record: {p.stderr.strip()[-600:]}",
            "sizes": 0, "sizes_ok": 0, "seconds": round(time.perf_counter() - start, 2), "call_ms": []}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="TritonBench-G's folder")
    ap.add_argument("--out", help="the JSON-lines file to write")
    ap.add_argument("--ops", default="", help="comma-separated operators (default: all with a harness)")
    ap.add_argument("--jobs", type=int, default=4, help="operators at once (processes on the one GPU)")
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child's side
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a.data, a.one)), flush=True)
        return 0
    if not a.out:
        ap.error("--out is required")
    from kforge.tritonbench_g.importer import operators
    ops = a.ops.split(",") if a.ops else operators(a.data)
    records = []
    # Each record is appended as it comes (a filter cut short keeps what it did), then sorted at the end.
    with open(a.out, "w", encoding="utf-8") as f, \
            concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for done in concurrent.futures.as_completed([pool.submit(run_isolated, a.data, op, a.timeout) for op in ops]):
            records.append(done.result())
            f.write(json.dumps(records[-1]) + "\n")
            f.flush()
    records.sort(key=lambda r: r["op"])
    with open(a.out, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    ok = sum(r["runnable"] for r in records)
    counts: dict[str, int] = {}
    for r in records:
        counts[r["category"]] = counts.get(r["category"], 0) + 1
    print(f"runnable {ok} of {len(records)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
