#!/usr/bin/env python3
"""Kernel Tuner's side of the race on benchmark_hub's convolution (issue 10, item 7).

Tunes the kernel with benchmark_hub's own script settings (kernels/convolution_milo.py of
AutoTuningAssociation/benchmark_hub, read 2026-12-03: the T1 space and conditions, grid divisors
block_size * tile_size, the filter in __constant__ d_filter through cmem_args, 32 iterations per
configuration, no output verification) with one strategy for a fixed wall time, and writes every
evaluation with the wall time at which it completed:

  {"tool": "kernel_tuner", "version": ..., "strategy": ..., "time_limit_s": ..., "backend": ...,
   "evaluations": [{"t_s": seconds since tune_kernel was called, "config": {...}, "time_ms": x | null,
                    "error": null | "CompilationFailedConfig" | ...}, ...]}

Usage (on the GPU machine, Kernel Tuner 1.5.0 installed):
  python3 kt_race.py --t1 T1.json --strategy bayes_opt --seconds 90 --out kt-bayes_opt.json
"""
import argparse
import json
import sys
import time
from collections import OrderedDict
from datetime import datetime
from pathlib import Path

import numpy


def space_from_t1(t1):
    """The tune_params (values evaluated as Kernel Tuner's tune_kernel_T1 does) and the conditions."""
    params = OrderedDict()
    for p in t1["ConfigurationSpace"]["TuningParameters"]:
        params[p["Name"]] = list(eval(p["Values"]))  # T1 value lists are Python expressions
    conditions = [c["Expression"] for c in t1["ConfigurationSpace"].get("Conditions", [])]
    return params, conditions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--t1", required=True, help="benchmark_hub's convolution T1.json (the kernel beside it)")
    ap.add_argument("--strategy", required=True)
    ap.add_argument("--seconds", type=float, required=True, help="Kernel Tuner's time_limit")
    ap.add_argument("--out", required=True)
    ap.add_argument("--lang", default="CUDA", help="CUDA (Kernel Tuner picks cuda-python, CuPy or PyCUDA) or CUPY")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    import kernel_tuner

    t1_path = Path(args.t1)
    t1 = json.loads(t1_path.read_text())
    spec = t1["KernelSpecification"]
    kernel_string = (t1_path.parent / spec["KernelFile"]).read_text()
    tune_params, restrictions = space_from_t1(t1)

    w = h = 4096
    fw = fh = 15
    numpy.random.seed(args.seed)
    problem_size = (w, h)
    output_image = numpy.zeros(w * h).astype(numpy.float32)
    input_image = numpy.random.randn((w + fw - 1) * (h + fh - 1)).astype(numpy.float32)
    filter_weights = numpy.random.randn(fh * fw).astype(numpy.float32)
    cmem_args = {"d_filter": filter_weights}
    arguments = [output_image, input_image, filter_weights]
    gflop = w * h * fw * fh * 2 / 1e9
    metrics = OrderedDict([("GFLOP/s", lambda p: gflop / (p["time"] / 1000.0))])

    start = time.time()
    results, env = kernel_tuner.tune_kernel(
        "convolution_kernel",
        kernel_string,
        problem_size,
        arguments,
        tune_params,
        grid_div_x=["block_size_x", "tile_size_x"],
        grid_div_y=["block_size_y", "tile_size_y"],
        cmem_args=cmem_args,
        restrictions=restrictions,
        metrics=metrics,
        lang=args.lang,
        iterations=32,
        device=0,
        verbose=False,
        quiet=True,
        strategy=args.strategy,
        strategy_options={"time_limit": args.seconds},
    )
    wall = time.time() - start

    evaluations = []
    for r in results:
        stamp = datetime.fromisoformat(str(r["timestamp"])).timestamp()
        error = r.get("__error__")
        t = r.get("time")
        if isinstance(t, str):  # older layout: the failure in place of the time
            error, t = t, None
        if error is not None:
            error = error if isinstance(error, str) else type(error).__name__
        evaluations.append({
            "t_s": stamp - start,
            "config": {k: r[k] for k in tune_params},
            "time_ms": None if error is not None or t is None else float(t),
            "error": error,
        })
    out = {
        "tool": "kernel_tuner",
        "version": kernel_tuner.__version__ if hasattr(kernel_tuner, "__version__") else "?",
        "strategy": args.strategy,
        "time_limit_s": args.seconds,
        "wall_s": wall,
        "backend": env.get("device_name", "?") + " / lang " + args.lang,
        "evaluations": evaluations,
    }
    Path(args.out).write_text(json.dumps(out))
    ok = [e for e in evaluations if e["time_ms"] is not None]
    best = min((e["time_ms"] for e in ok), default=float("nan"))
    print(f"kernel_tuner {args.strategy}: {len(evaluations)} evaluations ({len(ok)} ok) in {wall:.1f} s, "
          f"best {best:.4f} ms (Kernel Tuner's mean of 32)")


if __name__ == "__main__":
    sys.exit(main())
