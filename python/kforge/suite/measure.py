"""The final measurement of a suite kernel against its expert (issue 17, item 3), on the GPU machine.

    python -m kforge.suite.measure KERNEL --variant DIR [--search search.json] [--bench-hub DIR ...
        --bench-hub-configs configs.jsonl] [--rounds 10] [--calls 10] --out final.json [--later-call] [--fake]

KERNEL is sgemm, gemm_bf16, attention or conv2d. DIR is ``kforge render``'s folder of kforge's best
configuration (variant.json, variant.cubin); its shape is the one measured. search.json is
kforge.suite.search's summary of the search (copied into final.json). --bench-hub (conv2d): rendered
configurations of benchmark_hub's convolution at the same shape (kforge.suite.bench_hub), each a candidate
for the expert (render-<rank> folders; configs.jsonl gives their recorded times). --later-call: the search
ran in an earlier device call (final.json: "same_call_as_search": false).

One harness for every candidate, in this process, on the same input buffers:
1. Inputs: fresh, seeded (torch.Generator, seed 1): uniform [-1, 1] matrices and images, normal attention
   inputs and filter, as the kernel descriptions fill them. TF32 is off for matmuls and cuDNN.
2. Correctness first: a float64 reference computed by PyTorch (GEMMs in float64, attention by an explicit
   float64 softmax, the convolution as a sum of R^2 shifted float64 images); each candidate's output
   (kforge's buffer poisoned with NaN before its call) is compared with it by the kernel description's
   tolerance for the output's dtype (|out - ref| <= abs + rel |ref|, NaN fails). kforge's largest difference
   from the expert's output is recorded too. A wrong kforge output makes the row "wrong", whatever its speed.
3. Time: every candidate is called 3 times (warm-up; cuDNN picks its algorithm here), then ROUNDS rounds; in
   each round every candidate makes CALLS calls, each after a 256 MiB write that flushes the 60 MiB L2,
   each timed by a pair of CUDA events on PyTorch's stream; the order of the candidates rotates by one each
   round so that clock drift favours none. Per candidate: median, interquartile range, min, max and the
   median of each round (their spread shows drift).
4. The expert is the designated PyTorch call, or for conv2d the fastest correct benchmark_hub configuration
   of this measurement. Extra rows (cuDNN for conv2d, cuBLAS with bf16 output for gemm_bf16) are recorded
   with role "reference" and judged by nothing.

--fake (no GPU, no PyTorch): checks that the manifests bind to the harness's buffers (names, element counts,
element sizes) and writes final.json with "fake": true and placeholder times; scripts/suite-table refuses
such files. Exit status: 0 written, 1 the GPU side failed, 2 bad arguments or manifests.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import sys
import time
from pathlib import Path

from kforge.suite import cuda_launch

KERNELS = ("sgemm", "gemm_bf16", "attention", "conv2d")
# What each kernel must reach (issue 17, item 3): kforge's speed as a fraction of the expert's.
TARGETS = {
    "sgemm": {"ratio": 0.85, "against": "cuBLAS fp32, TF32 off"},
    "gemm_bf16": {"ratio": 0.70, "against": "cuBLAS bf16 x bf16 -> f32"},
    "attention": {"ratio": 1.0, "against": "PyTorch fp32 scaled_dot_product_attention"},
    "conv2d": {"ratio": 1.0, "against": "benchmark_hub convolution, best configuration"},
}
FLUSH_BYTES = 256 << 20
WARMUP_CALLS = 3
DEFAULT_TOLERANCE = {"f32": {"rel": 1e-5, "abs": 1e-6}, "bf16": {"rel": 2e-2, "abs": 1e-2}}


class MeasureError(Exception):
    """A bad argument or manifest (exit 2)."""


def shape_of(manifest: dict, names: tuple[str, ...]) -> dict:
    s = manifest["shape"]
    missing = [n for n in names if n not in s]
    if missing:
        raise MeasureError(f"{manifest['kernel']}: the rendered shape {s} lacks {missing}")
    return {n: s[n] for n in names}


def buffer_layout(kernel: str, shape: dict) -> dict:
    """name -> (element count, dtype, fill) of the kernel's buffers at the shape; the harness allocates these and
    the rendered manifest must agree (kforge.suite.cuda_launch.bind)."""
    if kernel in ("sgemm", "gemm_bf16"):
        m, n, k = shape["M"], shape["N"], shape["K"]
        t = "f32" if kernel == "sgemm" else "bf16"
        return {"A": (m * k, t, "uniform"), "B": (k * n, t, "uniform"), "C": (m * n, "f32", "out")}
    if kernel == "attention":
        n = shape["bh"] * shape["seq"] * 64
        return {"Q": (n, "f32", "normal"), "K": (n, "f32", "normal"), "V": (n, "f32", "normal"),
                "O": (n, "f32", "out")}
    if kernel == "conv2d":
        h, w, r = shape["H"], shape["W"], shape["R"]
        return {"in": (h * w, "f32", "uniform"), "filt": (r * r, "f32", "normal"), "out": (h * w, "f32", "out")}
    raise MeasureError(f"unknown kernel {kernel!r} (expected one of {', '.join(KERNELS)})")


SHAPE_NAMES = {"sgemm": ("M", "N", "K"), "gemm_bf16": ("M", "N", "K"), "attention": ("bh", "seq", "causal"),
               "conv2d": ("H", "W", "R")}


def bench_hub_buffers(shape: dict) -> dict:
    """benchmark_hub convolution's buffers (kforge.suite.bench_hub's description) at the suite's conv2d shape:
    name -> (count, dtype, what it is made of)."""
    h, w, r = shape["H"], shape["W"], shape["R"]
    return {"output": (h * w, "f32", "out"), "input": ((h + r - 1) * (w + r - 1), "f32", "padded in"),
            "filter": (r * r, "f32", "filt")}


BENCH_HUB_SHORT = {"block_size_x": "bx", "block_size_y": "by", "tile_size_x": "tx", "tile_size_y": "ty",
                   "read_only": "read_only", "use_padding": "padding"}


def bench_hub_name(rank: int, configuration: dict | None) -> str:
    """A benchmark_hub configuration's row name: its rank in the recording and the parameters that matter."""
    c = configuration or {}
    return f"benchmark_hub convolution #{rank} (" + ", ".join(
        f"{short} {c[k]}" for k, short in BENCH_HUB_SHORT.items() if k in c) + ")"


class _Stand:
    """A stand-in for a tensor in --fake mode: only what bind() looks at."""

    def __init__(self, count, dtype):
        self.count, self.size = count, cuda_launch.DTYPES[dtype][0]

    def numel(self):
        return self.count

    def element_size(self):
        return self.size


def stats(times: list[float], round_medians: list[float]) -> dict:
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return {"median_ms": statistics.median(times), "iqr_ms": q[2] - q[0], "min_ms": min(times),
            "max_ms": max(times), "calls": len(times), "round_medians_ms": round_medians}


def rotation(n: int, rounds: int) -> list[list[int]]:
    """The candidates' order in each round: 0..n-1 rotated by the round's number."""
    return [[(i + r) % n for i in range(n)] for r in range(rounds)]


def tolerance_for(manifest: dict, dtype: str) -> dict:
    return manifest.get("tolerance", {}).get(dtype) or DEFAULT_TOLERANCE[dtype]


# --- the GPU side ------------------------------------------------------------------------------------------

class Candidate:
    """One timed implementation: `call` enqueues its work on the current stream; `output` returns the tensor
    to check after a call (for PyTorch experts, what the last call returned)."""

    def __init__(self, name, role, call, output=None, poison=None, configuration=None, dtype="f32", note=""):
        self.name, self.role, self.configuration, self.dtype, self.note = name, role, configuration, dtype, note
        self._call, self._output, self._poison, self._last = call, output, poison, None

    def __call__(self):
        self._last = self._call()

    def result(self):
        return self._output() if self._output else self._last

    def poison(self):
        if self._poison is not None:
            self._poison.fill_(float("nan"))


def make_inputs(torch, layout: dict, seed: int = 1) -> dict:
    g = torch.Generator(device="cuda").manual_seed(seed)
    out = {}
    for name, (count, dtype, fill) in layout.items():
        tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        if fill == "uniform":
            out[name] = (torch.rand(count, device="cuda", generator=g) * 2 - 1).to(tdtype)
        elif fill == "normal":
            out[name] = torch.randn(count, device="cuda", generator=g).to(tdtype)
        else:
            out[name] = torch.full((count,), float("nan"), device="cuda", dtype=tdtype)
    return out


def reference(torch, kernel: str, shape: dict, x: dict, scale: float | None):
    """The float64 result, flat."""
    F = torch.nn.functional
    if kernel in ("sgemm", "gemm_bf16"):
        m, n, k = shape["M"], shape["N"], shape["K"]
        return (x["A"].double().view(m, k) @ x["B"].double().view(k, n)).flatten()
    if kernel == "attention":
        bh, seq, causal = shape["bh"], shape["seq"], shape["causal"]
        q, k, v = (x[n].double().view(bh, seq, 64) for n in ("Q", "K", "V"))
        out = torch.empty(bh, seq, 64, dtype=torch.float64, device="cuda")
        mask = torch.ones(seq, seq, dtype=torch.bool, device="cuda").tril() if causal else None
        for b in range(0, bh, 4):
            s = (q[b:b + 4] @ k[b:b + 4].transpose(1, 2)) * scale
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            out[b:b + 4] = torch.softmax(s, dim=-1) @ v[b:b + 4]
            del s
        return out.flatten()
    h, w, r = shape["H"], shape["W"], shape["R"]
    p = r // 2
    padded = F.pad(x["in"].double().view(h, w), (p, r - 1 - p, p, r - 1 - p))
    filt = x["filt"].double().view(r, r).tolist()
    acc = torch.zeros(h, w, dtype=torch.float64, device="cuda")
    for i in range(r):
        for j in range(r):
            acc.add_(padded[i:i + h, j:j + w], alpha=filt[i][j])
    return acc.flatten()


def compare(torch, got, ref, tol: dict) -> dict:
    g = got.reshape(-1).double()
    diff = (g - ref).abs()
    bad = ~(diff <= tol["abs"] + tol["rel"] * ref.abs())
    n_bad = int(bad.sum().item())
    out = {"correct": n_bad == 0, "wrong_elements": n_bad,
           "max_abs_error": float(diff.nan_to_num(float("inf")).max().item()), "tolerance": tol}
    if n_bad:
        out["first_wrong_index"] = int(bad.nonzero()[0].item())
    return out


def time_interleaved(torch, cands: list, rounds: int, calls: int) -> list[dict]:
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    for c in cands:
        for _ in range(WARMUP_CALLS):
            c()
    torch.cuda.synchronize()
    times = [[] for _ in cands]
    medians = [[] for _ in cands]
    for order in rotation(len(cands), rounds):
        for i in order:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
            for s, e in zip(starts, ends):
                flush.zero_()
                s.record()
                cands[i]()
                e.record()
            torch.cuda.synchronize()
            t = [s.elapsed_time(e) for s, e in zip(starts, ends)]
            times[i] += t
            medians[i].append(statistics.median(t))
    return [stats(t, m) for t, m in zip(times, medians)]


def sdpa_backend(torch, call, out) -> str:
    """Which SDPA backend the default dispatch used: the one whose forced run gives identical output."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with sdpa_kernel(backend):
                o = call()
            torch.cuda.synchronize()
        except RuntimeError:
            continue
        if torch.equal(o, out):
            return name.lower()
    return "unknown"


def run_gpu(args, manifest: dict, bench_hub: list[dict]) -> dict:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.set_float32_matmul_precision("highest")
    kernel = args.kernel
    shape = shape_of(manifest, SHAPE_NAMES[kernel])
    layout = buffer_layout(kernel, shape)
    x = make_inputs(torch, layout)
    F = torch.nn.functional
    notes = []
    kforge = cuda_launch.Variant(args.variant, {n: x[n] for n in layout})
    out_name = kforge.plan["outputs"]
    if len(out_name) != 1:
        raise MeasureError(f"{args.variant}: the kernel writes {out_name}; the harness checks one output")
    cands = [Candidate("kforge best", "kforge", kforge.launch, kforge.output, kforge.output(),
                       manifest.get("configuration"))]
    scale = None
    if kernel == "sgemm":
        m, n, k = shape["M"], shape["N"], shape["K"]
        a, b = x["A"].view(m, k), x["B"].view(k, n)
        cands.append(Candidate("torch.mm fp32, TF32 off (cuBLAS)", "expert", lambda: torch.mm(a, b)))
    elif kernel == "gemm_bf16":
        m, n, k = shape["M"], shape["N"], shape["K"]
        a, b = x["A"].view(m, k), x["B"].view(k, n)
        try:
            torch.mm(a, b, out_dtype=torch.float32)
            cands.append(Candidate("torch.mm(out_dtype=float32) (cuBLAS, f32 C)", "expert",
                                   lambda: torch.mm(a, b, out_dtype=torch.float32)))
        except (TypeError, RuntimeError) as e:
            notes.append(f"torch.mm has no out_dtype here ({str(e)[:120]}): the expert is matmul(...).float()")
            cands.append(Candidate("torch.matmul(...).float() (cuBLAS bf16 C, then f32)", "expert",
                                   lambda: torch.matmul(a, b).float()))
        cands.append(Candidate("torch.matmul (cuBLAS, bf16 C)", "reference", lambda: torch.matmul(a, b),
                               dtype="bf16"))
    elif kernel == "attention":
        bh, seq, causal = shape["bh"], shape["seq"], bool(shape["causal"])
        scale = next(a["value"] for a in manifest["arguments"] if a["name"] == "scale")
        q, k, v = (x[nm].view(1, bh, seq, 64) for nm in ("Q", "K", "V"))
        sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)  # noqa: E731
        first = sdpa()
        backend = sdpa_backend(torch, sdpa, first)
        cands.append(Candidate(f"torch sdpa fp32 (default dispatch: {backend})", "expert", sdpa,
                               note=f"backend {backend}"))
    else:
        h, w, r = shape["H"], shape["W"], shape["R"]
        img, filt = x["in"].view(1, 1, h, w), x["filt"].view(1, 1, r, r)
        cands.append(Candidate("torch conv2d fp32, TF32 off (cuDNN, benchmark mode)", "reference",
                               lambda: F.conv2d(img, filt, padding=r // 2)))
        if bench_hub:
            p = r // 2
            padded = F.pad(x["in"].view(h, w), (p, r - 1 - p, p, r - 1 - p)).contiguous().flatten()
            bh_out = torch.full((h * w,), float("nan"), device="cuda")
            bufs = {"output": bh_out, "input": padded, "filter": x["filt"]}
            for d in bench_hub:
                v = cuda_launch.Variant(d["folder"], bufs, {"d_filter": x["filt"]})
                cands.append(Candidate(bench_hub_name(d["rank"], v.manifest.get("configuration")), "expert",
                                       v.launch, v.output,
                                       bh_out, v.manifest.get("configuration"),
                                       note=f"rank {d['rank']} of the H200 recording at 4096^2"
                                       + (f" ({d['recorded_ms']:.4f} ms there)" if d["recorded_ms"] else "")))
        else:
            notes.append("no benchmark_hub configuration was rendered: conv2d has no expert in this run")
    torch.cuda.synchronize()

    # Correctness: every candidate against the float64 reference.
    ref = reference(torch, kernel, shape, x, scale)
    checks, expert_out = [], None
    for c in cands:
        c.poison()
        c()
        torch.cuda.synchronize()
        res = c.result()
        checks.append(compare(torch, res, ref, tolerance_for(manifest, c.dtype)))
        if c.role == "expert" and expert_out is None and c.result() is not None and c.dtype == "f32":
            expert_out = res.reshape(-1).clone() if c.name.startswith("benchmark_hub") else res.reshape(-1)
    cands[0].poison()
    cands[0]()
    torch.cuda.synchronize()
    diff = None
    if expert_out is not None:
        diff = float((cands[0].result().reshape(-1) - expert_out).abs().nan_to_num(float("inf")).max().item())
    del ref, expert_out
    torch.cuda.empty_cache()

    timed = time_interleaved(torch, cands, args.rounds, args.calls)
    rows = []
    for c, chk, t in zip(cands, checks, timed):
        rows.append({"name": c.name, "role": c.role, "configuration": c.configuration, "note": c.note,
                     "output_dtype": c.dtype, **chk, **t})
    import subprocess
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
                              "temperature.gpu,power.draw", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        smi = ""
    env = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "nvidia_smi_after": smi}
    return {"environment": env, "candidates": rows, "kforge_vs_expert_max_abs": diff, "notes": notes}


def run_fake(args, manifest: dict, bench_hub: list[dict]) -> dict:
    kernel = args.kernel
    shape = shape_of(manifest, SHAPE_NAMES[kernel])
    layout = buffer_layout(kernel, shape)
    cuda_launch.bind(manifest, {n: _Stand(c, t) for n, (c, t, _) in layout.items()})
    bh_layout = bench_hub_buffers(shape) if kernel == "conv2d" else {}
    rows = [{"name": "kforge best", "role": "kforge", "configuration": manifest.get("configuration"),
             "correct": True, "median_ms": 1.0}]
    for d in bench_hub:
        m = cuda_launch.load_manifest(d["folder"])
        if m["shape"] != manifest["shape"]:
            raise MeasureError(f"{d['folder']}: shape {m['shape']} is not kforge's {manifest['shape']}")
        cuda_launch.bind(m, {n: _Stand(c, t) for n, (c, t, _) in bh_layout.items()},
                         {"d_filter": _Stand(shape["R"] ** 2, "f32")})
        rows.append({"name": bench_hub_name(d["rank"], m.get("configuration")), "role": "expert",
                     "configuration": m.get("configuration"), "correct": True, "median_ms": 1.0})
    if kernel != "conv2d":
        rows.append({"name": "expert (fake)", "role": "expert", "correct": True, "median_ms": 1.0})
    for r in rows:
        r.update({"iqr_ms": 0.0, "min_ms": 1.0, "max_ms": 1.0, "calls": 0, "round_medians_ms": [],
                  "wrong_elements": 0, "max_abs_error": 0.0, "note": "fake", "output_dtype": "f32"})
    return {"environment": {"device": "fake"}, "candidates": rows, "kforge_vs_expert_max_abs": None,
            "notes": ["--fake: no GPU; placeholder times"]}


def choose_expert(rows: list[dict]) -> dict | None:
    """The expert row: the single expert, or the fastest correct of several (benchmark_hub's configurations);
    the fastest of all when none is correct."""
    experts = [r for r in rows if r["role"] == "expert"]
    if not experts:
        return None
    correct = [r for r in experts if r.get("correct")]
    return min(correct or experts, key=lambda r: r["median_ms"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", choices=KERNELS)
    ap.add_argument("--variant", type=Path, required=True)
    ap.add_argument("--search", type=Path)
    ap.add_argument("--bench-hub", type=Path, nargs="*", default=[])
    ap.add_argument("--bench-hub-configs", type=Path, help="bench_hub's configs.jsonl (recorded times, ranks)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--later-call", action="store_true",
                    help="the search ran in an earlier device call (final.json: same_call_as_search false)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        print("kforge.suite.measure: --rounds and --calls must be at least 1", file=sys.stderr)
        return 2
    t0 = time.time()
    try:
        manifest = cuda_launch.load_manifest(args.variant)
        if manifest["kernel"] != args.kernel:
            raise MeasureError(f"{args.variant}: a rendering of {manifest['kernel']}, not {args.kernel}")
        search = json.loads(args.search.read_text()) if args.search else None
        recorded = []
        if args.bench_hub_configs:
            recorded = [json.loads(line) for line in args.bench_hub_configs.read_text().splitlines() if line.strip()]
        bench_hub = []
        for i, folder in enumerate(args.bench_hub):
            rank = int(folder.name.rsplit("-", 1)[-1]) if folder.name.rsplit("-", 1)[-1].isdigit() else i
            rec = recorded[rank]["recorded_ms"] if rank < len(recorded) else None
            bench_hub.append({"folder": folder, "rank": rank, "recorded_ms": rec})
        body = (run_fake if args.fake else run_gpu)(args, manifest, bench_hub)
    except (MeasureError, ValueError, OSError) as e:
        print(f"kforge.suite.measure: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"kforge.suite.measure: GPU side failed: {e}", file=sys.stderr)
        return 1
    rows = body.pop("candidates")
    k = rows[0]
    expert = choose_expert(rows)
    ratio = expert["median_ms"] / k["median_ms"] if expert else None
    target = TARGETS[args.kernel]
    final = {
        "kernel": args.kernel,
        "fake": bool(args.fake),
        "same_call_as_search": not args.later_call,
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "shape": manifest["shape"],
        "protocol": {"timer": "CUDA events on PyTorch's stream", "flush_bytes": FLUSH_BYTES,
                     "warmup_calls": WARMUP_CALLS, "rounds": args.rounds, "calls_per_round": args.calls,
                     "order": "rotated by one candidate each round", "seed": 1,
                     "check": "float64 PyTorch reference, the kernel description's tolerance"},
        "roofline": manifest.get("roofline"),
        "target": target,
        "search": search,
        "kforge": k,
        "expert": expert,
        "candidates": rows,
        "ratio": ratio,
        "met": bool(expert and k.get("correct") and ratio >= target["ratio"]),
        "variant": {key: manifest.get(key) for key in ("describe", "defaults", "arch", "options", "lowered_name",
                                                       "launch", "static", "cache_hit", "nvrtc")},
        "measure_s": round(time.time() - t0, 1),
        **body,
    }
    args.out.write_text(json.dumps(final, indent=1, sort_keys=True) + "\n")
    for r in rows:
        flag = "" if r.get("correct") else " WRONG"
        print(f"{args.kernel}: {r['role']:9s} {r['median_ms']:.4f} ms (IQR {r['iqr_ms']:.4f}){flag}  {r['name']}")
    if expert:
        print(f"{args.kernel}: kforge / expert speed {ratio:.3f} (target {target['ratio']}): "
              f"{'met' if final['met'] else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
