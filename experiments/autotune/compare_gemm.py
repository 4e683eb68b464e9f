"""kforge.autotune against triton.autotune on the Triton suite's GEMM (experiments/kernels-triton/gemm_bf16),
on a GPU: the same configuration list (and a larger space for kforge), each variant in a fresh process with an
empty Triton cache and no stored tuning, so that wall time includes every compile.

    python3 experiments/autotune/compare_gemm.py [--size 4096] [--out table.md] [--deadline 200]

Per variant: candidates, configurations evaluated, tuning wall time (first call: compiles + checks + timing),
the chosen configuration and its time re-measured with triton.testing.do_bench (median of 5 runs of it, the
same for every variant), and TFLOP/s. A last row times a second process with kforge's store already filled.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "experiments/kernels-triton/gemm_bf16"

# The list: the kind of list a Triton user writes (Triton's matmul tutorial's for Hopper, widened a little).
LIST = [
    (128, 256, 64, 8, 8, 3), (64, 256, 32, 8, 4, 4), (128, 128, 32, 8, 4, 4), (128, 64, 32, 8, 4, 4),
    (64, 128, 32, 8, 4, 4), (128, 32, 32, 8, 4, 4), (64, 32, 32, 8, 2, 5), (32, 64, 32, 8, 2, 5),
    (128, 256, 128, 8, 8, 3), (256, 128, 128, 8, 8, 3), (256, 64, 128, 8, 4, 4), (64, 256, 128, 8, 4, 4),
    (128, 128, 128, 8, 4, 4), (128, 64, 64, 8, 4, 4), (64, 128, 64, 8, 4, 4), (128, 32, 64, 8, 4, 4),
    (128, 128, 64, 8, 8, 3), (128, 128, 64, 8, 4, 3), (256, 128, 64, 8, 8, 3), (128, 256, 64, 16, 8, 4),
    (64, 64, 64, 8, 4, 4), (256, 256, 64, 8, 8, 3), (128, 128, 64, 4, 8, 4), (128, 256, 32, 8, 8, 4),
]
# kforge's larger space: the suite's parameters and constraints (kernel.yaml).
SPACE = {"params": {"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256], "BLOCK_K": [16, 32, 64, 128],
                    "GROUP_M": [1, 4, 8, 16], "num_warps": [2, 4, 8], "num_stages": [1, 2, 3, 4, 5]},
         "constraints": ["BLOCK_M * BLOCK_N <= 128 * 32 * num_warps",
                         "(BLOCK_M + BLOCK_N) * BLOCK_K * 2 * num_stages <= 227 * 1024"]}

VARIANTS = {
    "triton.autotune, list": dict(tool="triton"),
    "kforge.autotune, list, all": dict(tool="kforge", budget=None),
    "kforge.autotune, space, 48": dict(tool="kforge", budget=48, space=True),
    "kforge.autotune, list, all, 2nd process": dict(tool="kforge", budget=None, second=True),
    "kforge.autotune, list, half": dict(tool="kforge", budget=0.5),
}  # in order of importance: what the deadline leaves out comes last


def one(variant, size, store):
    """Runs one variant in this process; prints a JSON line."""
    import torch
    import triton
    import triton.testing

    sys.path.insert(0, str(SUITE))
    import gemm_bf16 as g

    import kforge

    configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": gm}, num_warps=w, num_stages=s)
               for m, n, k, gm, w, s in LIST]
    v = VARIANTS[variant]
    kernel_fn = g.gemm_bf16_kernel
    if v["tool"] == "triton":
        tuned = triton.autotune(configs=configs, key=["M", "N", "K"])(kernel_fn)
    else:
        space = None
        if v.get("space"):
            space = kforge.Space(SPACE["params"], constraints=SPACE["constraints"])
        tuned = kforge.autotune(configs=configs, key=["M", "N", "K"], budget=v["budget"], space=space,
                                strategy="hybrid", seed=0, store=store, atol=5e-2, rtol=1e-2)(kernel_fn)
    M = N = K = size
    torch.manual_seed(0)
    a = torch.empty((M, K), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
    b = torch.empty((K, N), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
    c = torch.empty((M, N), device="cuda", dtype=torch.float32)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    tuned[grid](a, b, c, M, N, K)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    best = tuned.best_config
    ok = torch.allclose(c, (a.float() @ b.float()), atol=5e-2, rtol=1e-2)
    meta = best.all_kwargs()
    runs = [triton.testing.do_bench(lambda: kernel_fn[grid](a, b, c, M, N, K, **meta), return_mode="median")
            for _ in range(5)]
    runs.sort()
    ms = runs[2]
    report = next(iter(tuned.reports.values()), {}) if hasattr(tuned, "reports") else {}
    evaluated = report.get("evaluations", len(configs)) if v["tool"] == "kforge" else len(configs)
    candidates = report.get("candidates", len(configs))
    print(json.dumps({"variant": variant, "candidates": candidates, "evaluated": evaluated, "wall_s": wall,
                      "best": str(best), "ms": ms, "spread_ms": [runs[0], runs[-1]],
                      "tflops": 2 * M * N * K / ms / 1e9, "correct": bool(ok),
                      "compile_wall_s": report.get("compile_wall_s"), "compile_cpu_s": report.get("compile_cpu_s"),
                      "from_store": report.get("from_store", False)}), flush=True)


def table(rows, size):
    """The Markdown table of the rows so far, and one line per kforge variant against triton.autotune."""
    lines = [f"GEMM bf16 {size}^3 (f32 accumulate), {len(LIST)}-configuration list; kforge: hybrid strategy, "
             f"seed 0, {os.cpu_count()} cores for compiles",
             "",
             "| variant | candidates | evaluated | tuning wall s (incl. compiles) | compile wall s | best configuration "
             "| best ms (median of 5 do_bench) | TFLOP/s | correct |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['variant']} | | | | | {r['skipped']} | | | |")
            continue
        cw = "" if r["compile_wall_s"] is None else f"{r['compile_wall_s']:.1f}"
        lines.append(f"| {r['variant']} | {r['candidates']} | {r['evaluated']} | {r['wall_s']:.1f} | {cw} | {r['best']} "
                     f"| {r['ms']:.4f} ({r['spread_ms'][0]:.4f}-{r['spread_ms'][1]:.4f}) | {r['tflops']:.0f} "
                     f"| {r['correct']} |")
    base = next((r for r in rows if r["variant"].startswith("triton") and "skipped" not in r), None)
    if base:
        lines.append("")
        for r in rows:
            if r is base or "skipped" in r:
                continue
            lines.append(f"{r['variant']}: best {r['ms']:.4f} ms vs triton.autotune's {base['ms']:.4f} ms "
                         f"({base['ms'] / r['ms']:.3f}x as fast), tuning wall {r['wall_s']:.1f} s vs "
                         f"{base['wall_s']:.1f} s ({base['wall_s'] / max(r['wall_s'], 1e-9):.1f}x less)")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--out", default=None, help="the table (Markdown), rewritten after every variant")
    ap.add_argument("--deadline", type=float, default=float(os.environ.get("KF_DEADLINE_S", 200)),
                    help="seconds for all variants; a variant that would start with less than 20 s left, or "
                         "runs past the deadline, is reported as skipped")
    ap.add_argument("--variant", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--store", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:
        one(args.variant, args.size, args.store or False)
        return
    rows = []
    store = tempfile.mkdtemp(prefix="kforge-autotune-store-")
    first_cache = None
    start_method = None
    t_start = time.perf_counter()

    def write():
        text = table(rows, args.size)
        if args.out:
            Path(args.out).write_text(text + "\n")
        return text

    for variant, v in VARIANTS.items():
        left = args.deadline - (time.perf_counter() - t_start)
        if left < 20:
            rows.append({"variant": variant, "skipped": f"skipped: {left:.0f} s left of --deadline {args.deadline:.0f}"})
            write()
            continue
        env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="triton-cache-"))
        if v.get("second"):
            if first_cache is None:
                rows.append({"variant": variant, "skipped": "skipped: the first kforge variant did not finish"})
                write()
                continue
            env["TRITON_CACHE_DIR"] = first_cache  # the first run's compiled kernels, as a second process has
        # kforge's compile pool forks; where a forked worker fails on this machine, the variant runs again
        # with fresh workers (KFORGE_AUTOTUNE_START=spawn), and so do the ones after it (the row says so).
        for attempt in ("default", "spawn"):
            if attempt == "spawn":
                if v["tool"] != "kforge" or start_method or "KFORGE_AUTOTUNE_START" in os.environ or left < 30:
                    break
                start_method = "spawn"
                if not v.get("second"):
                    env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
                if variant == "kforge.autotune, list, all":  # the failed attempt may have stored trials
                    store = tempfile.mkdtemp(prefix="kforge-autotune-store-")
            if start_method:
                env["KFORGE_AUTOTUNE_START"] = start_method
            cmd = [sys.executable, __file__, "--variant", variant, "--size", str(args.size),
                   "--store", store if v.get("second") or variant == "kforge.autotune, list, all" else ""]
            t0 = time.perf_counter()
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=left)
            except subprocess.TimeoutExpired as e:
                print(f"{variant}: past the deadline\n{(e.stderr or b'')[-3000:]!r}", file=sys.stderr)
                r = None
                break
            if r.returncode == 0:
                break
            print(f"{variant} ({attempt} start): failed\n{r.stderr[-3000:]}", file=sys.stderr)
            left = args.deadline - (time.perf_counter() - t_start)
        if r is None:
            rows.append({"variant": variant, "skipped": f"stopped after {time.perf_counter() - t0:.0f} s (deadline)"})
            write()
            continue
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["?"])[-1][:120].replace("|", "/")
            rows.append({"variant": variant, "skipped": f"failed (exit {r.returncode}): {last}"})
            write()
            continue
        if start_method:
            variant = f"{variant} (spawned compile workers)"
        if variant.startswith("kforge.autotune, list, all") and not v.get("second"):
            first_cache = env["TRITON_CACHE_DIR"]
        row = json.loads(r.stdout.strip().splitlines()[-1])
        row["variant"] = variant
        row["process_s"] = time.perf_counter() - t0
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        write()
    write()


if __name__ == "__main__":
    main()
