#!/usr/bin/env python3
"""Issue 11 items 5 and 6 on the GPU machine: the Triton suite kernels against the experts, in one harness.

For each kernel named, in this process and on the same GPU:
  expert      the expert implementation (torch.matmul on cuBLAS; scaled_dot_product_attention with the
              flash backend; torch.softmax; torch.nn.functional.layer_norm)
  kforge      the best configuration of a kforge run (its run folder exported as JSONL: --runs DIR, files
              DIR/<kernel>.jsonl and DIR/<kernel>.meta.json), re-launched here through Triton's JIT and
              timed by the same harness as the expert, after its output is checked against the expert's
  autotune    (--autotune) triton.autotune over a tutorial-style configuration list (below) on the same
              kernel, in a fresh Triton cache: the wall time of its first call (every compile and Triton's
              own benchmarking) and its chosen configuration, re-timed by the same harness

The harness (METHOD.md): fresh seeded inputs; outputs poisoned with NaN before the checked call; 5 warm-up
calls; then REPEATS timed calls, each after a 256 MiB write that flushes the 60 MiB L2, timed with CUDA
events; median and interquartile range reported.

Writes one JSON document (--out) and prints a Markdown table.
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "experiments" / "kernels-triton"
REPEATS = 100

# Tutorial-style lists for item 6 (the shapes of the lists in Triton's matmul and fused-attention tutorials,
# Triton 3.x, read 2026-12-03), as (parameters, num_warps, num_stages).
GEMM_LIST = [
    ({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, 8, 3),
    ({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, 2, 5),
    ({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 2, 5),
]
ATTENTION_LIST = [({"BLOCK_M": m, "BLOCK_N": n}, w, s)
                  for m in (64, 128) for n in (32, 64, 128) for s in (2, 3, 4) for w in (4, 8)]
# The suite's constraints (experiments/kernels-triton/*/kernel.yaml), so that kforge's space contains the list
# triton.autotune gets: configurations outside them are dropped from the list (their count is reported).
WITHIN_SPACE = {
    "gemm_bf16": lambda p, w, s: p["BLOCK_M"] * p["BLOCK_N"] <= 128 * 32 * w
    and (p["BLOCK_M"] + p["BLOCK_N"]) * p["BLOCK_K"] * 2 * s <= 227 * 1024,
    "flash_attention": lambda p, w, s: p["BLOCK_M"] <= 32 * w and p["BLOCK_M"] * p["BLOCK_N"] <= 2048 * w
    and (p["BLOCK_M"] + 2 * p["BLOCK_N"] * s) * 128 * 2 <= 227 * 1024,
}


def load_module(name):
    path = SUITE / name / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"suite_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench(fn, torch):
    """Median and IQR (ms) of REPEATS calls of fn, each after an L2 flush, timed with CUDA events."""
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(5):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(REPEATS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(REPEATS)]
    for s, e in zip(starts, ends):
        flush.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    q = statistics.quantiles(times, n=4)
    return {"median_ms": statistics.median(times), "iqr_ms": q[2] - q[0], "repeats": REPEATS}


class Problem:
    """A suite kernel at its time shape: inputs, the expert, a launcher of the Triton kernel, a check."""

    def __init__(self, name, torch, seed=1):
        self.name, self.torch = name, torch
        self.module = load_module(name)
        g = torch.Generator(device="cuda").manual_seed(seed)
        cuda = {"device": "cuda", "generator": g}
        if name == "gemm_bf16":
            m = n = k = 4096
            self.a = (torch.rand(m, k, **cuda) * 2 - 1).to(torch.bfloat16)
            self.b = (torch.rand(k, n, **cuda) * 2 - 1).to(torch.bfloat16)
            self.out = torch.empty(m, n, device="cuda", dtype=torch.float32)
            self.shape = (m, n, k)
            self.flops = 2 * m * n * k
        elif name == "flash_attention":
            b, h, s, d = 16, 32, 8192, 128
            self.q, self.k, self.v = (torch.randn(b, h, s, d, **cuda).to(torch.bfloat16) for _ in range(3))
            self.out = torch.empty_like(self.q)
            self.shape = (b, h, s, d)
            self.flops = 4 * b * h * d * (s * (s + 1) // 2)
        elif name in ("softmax", "layernorm"):
            rows, cols = 32768, 4096
            if name == "softmax":
                self.x = torch.randn(rows, cols, **cuda) * 4
            else:
                self.x = torch.randn(rows, cols, **cuda) * 2 + 1
                self.gamma = torch.rand(cols, **cuda) + 0.5
                self.beta = torch.rand(cols, **cuda) * 2 - 1
            self.out = torch.empty_like(self.x)
            self.shape = (rows, cols)
            self.bytes = 2 * rows * cols * 4
        else:
            raise SystemExit(f"triton_expert: unknown kernel {name!r}")

    def expert(self):
        t, F = self.torch, self.torch.nn.functional
        if self.name == "gemm_bf16":
            return lambda: t.matmul(self.a, self.b)
        if self.name == "flash_attention":
            def sdpa():
                with t.nn.attention.sdpa_kernel(t.nn.attention.SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)
            return sdpa
        if self.name == "softmax":
            return lambda: t.softmax(self.x, dim=1)
        return lambda: F.layer_norm(self.x, (self.shape[1],), self.gamma, self.beta, 1e-5)

    def expert_name(self):
        return {"gemm_bf16": "torch.matmul (cuBLAS), bf16 out", "flash_attention": "torch sdpa (flash), causal",
                "softmax": "torch.softmax", "layernorm": "torch layer_norm"}[self.name]

    def launcher(self, kernel, params, num_warps, num_stages):
        """A call of `kernel` (a JITFunction or an Autotuner) with the given configuration (params may be {}
        for an Autotuner, which picks its own)."""
        extra = dict(params)
        if num_warps is not None:
            extra.update(num_warps=num_warps, num_stages=num_stages)
        if self.name == "gemm_bf16":
            m, n, k = self.shape
            grid = lambda meta: (((m + meta["BLOCK_M"] - 1) // meta["BLOCK_M"]) * ((n + meta["BLOCK_N"] - 1) // meta["BLOCK_N"]),)
            return lambda: kernel[grid](self.a, self.b, self.out, m, n, k, **extra)
        if self.name == "flash_attention":
            b, h, s, d = self.shape
            grid = lambda meta: ((s + meta["BLOCK_M"] - 1) // meta["BLOCK_M"], b * h)
            return lambda: kernel[grid](self.q, self.k, self.v, self.out, s, d ** -0.5, HEAD_DIM=d, **extra)
        rows, cols = self.shape
        grid = lambda meta: ((rows + meta["ROWS"] - 1) // meta["ROWS"],)
        if self.name == "softmax":
            return lambda: kernel[grid](self.x, self.out, rows, cols, **extra)
        return lambda: kernel[grid](self.x, self.gamma, self.beta, self.out, rows, cols, 1e-5, **extra)

    def check(self, call):
        """Poisons the output, calls once, compares with the expert in f32; returns (ok, max |error|)."""
        t = self.torch
        self.out.fill_(float("nan"))
        call()
        t.cuda.synchronize()
        if self.name == "gemm_bf16":
            want = t.matmul(self.a.float(), self.b.float())
            tol = (1e-3, 5e-3)
        elif self.name == "flash_attention":
            want = self.expert()().float()
            tol = (2e-2, 1e-2)
        else:
            want = self.expert()().float()
            tol = (2e-5, 1e-6) if self.name == "softmax" else (1e-4, 1e-4)
        got = self.out.float()
        bad = ~((got - want).abs() <= tol[1] + tol[0] * want.abs())
        return int(bad.sum().item()) == 0, float((got - want).abs().nan_to_num(float("inf")).max().item())


def best_of_run(runs, name):
    rows = [json.loads(line) for line in open(runs / f"{name}.jsonl")]
    meta = json.loads((runs / f"{name}.meta.json").read_text()) if (runs / f"{name}.meta.json").exists() else {}
    setup = meta.get("setup_s", 0.0)
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return None
    best = min(ok, key=lambda r: r["time_ms"])
    statuses = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {"configuration": best["configuration"], "time_ms_in_run": best["time_ms"],
            "found_at_s": best["clock_s"] + setup, "trials": len(rows), "statuses": statuses,
            "wall_s": max(r["clock_s"] for r in rows) + setup,
            "first_within_pct": lambda target: next((r["clock_s"] + setup for r in sorted(ok, key=lambda r: r["clock_s"])
                                                    if r["time_ms"] <= target), None)}


def split(configuration):
    params = {k: v for k, v in configuration.items() if k not in ("num_warps", "num_stages", "num_ctas", "maxnreg")}
    return params, configuration.get("num_warps", 4), configuration.get("num_stages", 3)


def autotune(problem, triton):
    """triton.autotune over the list on the suite kernel, first call timed from a cold cache."""
    listed = GEMM_LIST if problem.name == "gemm_bf16" else ATTENTION_LIST
    kept = [c for c in listed if WITHIN_SPACE[problem.name](*c)]
    configs = [triton.Config(p, num_warps=w, num_stages=s) for p, w, s in kept]
    jit = getattr(problem.module, f"{'attention' if problem.name == 'flash_attention' else problem.name}_kernel")
    tuned = triton.autotune(configs=configs, key=[])(jit)
    call = problem.launcher(tuned, {}, None, None)
    t0 = time.perf_counter()
    call()
    problem.torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    best = tuned.best_config
    chosen = dict(best.kwargs, num_warps=best.num_warps, num_stages=best.num_stages)
    return {"list": len(configs), "dropped": len(listed) - len(kept), "wall_s": wall, "configuration": chosen}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--runs", type=Path, help="folder with <kernel>.jsonl (+ .meta.json) of kforge runs")
    ap.add_argument("--autotune", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    # A cold Triton cache for triton.autotune's wall time (kforge's workers keep their own caches).
    os.environ.setdefault("TRITON_CACHE_DIR", f"/tmp/triton-expert-cache-{os.getpid()}")
    import torch
    import triton

    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "repeats": REPEATS, "kernels": {}}
    for name in args.kernels:
        p = Problem(name, torch)
        entry = {"expert": {"name": p.expert_name(), **bench(p.expert(), torch)}}
        jit = getattr(p.module, f"{'attention' if name == 'flash_attention' else name}_kernel")
        if args.runs and (args.runs / f"{name}.jsonl").exists():
            run = best_of_run(args.runs, name)
            if run:
                params, w, s = split(run["configuration"])
                call = p.launcher(jit, params, w, s)
                ok, err = p.check(call)
                within = run.pop("first_within_pct")
                entry["kforge"] = {**run, "correct": ok, "max_error": err, **bench(call, torch)}
                entry["kforge"]["reached_expert_s"] = within(entry["expert"]["median_ms"])
        if args.autotune and name in ("gemm_bf16", "flash_attention"):
            a = autotune(p, triton)
            params, w, s = split(a["configuration"])
            call = p.launcher(jit, params, w, s)
            ok, err = p.check(call)
            entry["autotune"] = {**a, "correct": ok, "max_error": err, **bench(call, torch)}
        results["kernels"][name] = entry
        print(json.dumps({name: entry}), flush=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(table(results))


def table(results):
    lines = [f"{results['device']}, torch {results['torch']}, triton {results['triton']}; median of "
             f"{results['repeats']} L2-flushed calls (IQR)", "",
             "| kernel | expert | expert ms | kforge best ms | kforge / expert speed | found at (s) | "
             "trials | triton.autotune ms | its wall (s) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, e in results["kernels"].items():
        x, k, a = e["expert"], e.get("kforge"), e.get("autotune")
        row = [name, x["name"], f"{x['median_ms']:.4f} ({x['iqr_ms']:.4f})"]
        if k:
            flag = "" if k["correct"] else " WRONG"
            row += [f"{k['median_ms']:.4f} ({k['iqr_ms']:.4f}){flag}", f"{100 * x['median_ms'] / k['median_ms']:.0f}%",
                    f"{k['found_at_s']:.0f}", str(k["trials"])]
        else:
            row += ["-"] * 4
        row += [f"{a['median_ms']:.4f} ({a['iqr_ms']:.4f})", f"{a['wall_s']:.1f} ({a['list']} configs)"] if a else ["-", "-"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
