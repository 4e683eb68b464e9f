"""kforge.suite.measure's GPU path run here: PyTorch replaced by a numpy stand-in (fake_torch.py) and the CUBIN
launch by an emulation of each kernel on its bound buffers, at small shapes that `kforge render` (this build's)
resolves from the real kernel descriptions. Checks what a device call would otherwise find out late: the
inputs, experts and float64 references agree with the kernels' semantics (a correct emulation passes every
check, a wrong one is caught), the interleaved timing gives each candidate its own times, and final.json has
what scripts/suite-table reads."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import fake_torch
from kforge.suite import bench_hub, cuda_launch, measure, table

ROOT = Path(__file__).resolve().parents[2]
KFORGE = Path(os.environ.get("KFORGE_BUILD_DIR", ROOT / "build")) / "kforge"
SHARED = Path(os.environ.get("KFORGE_SHARED_DATA", ROOT.parent / "shared" / "data"))
CONV = SHARED / "tuning-spaces" / "benchmark_hub" / "convolution"
RECORDING = ROOT / "experiments/benchmark_hub/h200/convolution-H200.json.gz"
pytestmark = pytest.mark.skipif(not KFORGE.exists(), reason=f"{KFORGE} was not built")

SHAPES = {"sgemm": {"M": 33, "N": 40, "K": 17}, "gemm_bf16": {"M": 24, "N": 16, "K": 40},
          "attention": {"bh": 3, "seq": 20, "causal": 1}, "conv2d": {"H": 37, "W": 29, "R": 15}}
# The emulated kernels' times (ms); the experts' are fake_torch.COST.
KFORGE_MS = {"sgemm": 1.25, "gemm_bf16": 1.6, "attention": 1.0, "conv2d": 4.0, "bench_hub_convolution": 2.0}


class Emulated:
    """cuda_launch.Variant's interface: the manifest bound to the buffers by the real bind(); launch() computes
    the kernel's result with numpy into its output buffer (or garbage when WRONG names the kernel)."""
    wrong = set()

    def __init__(self, folder, buffers, constants=None, driver=None):
        self.manifest = cuda_launch.load_manifest(folder)
        self.plan = cuda_launch.bind(self.manifest, buffers, constants)
        self.buffers, self.constants = buffers, constants or {}

    def output(self):
        return self.buffers[self.plan["outputs"][0]]

    def launch(self):
        k, s, b = self.manifest["kernel"], self.manifest["shape"], self.buffers
        scalars = {a["name"]: a["value"] for a in self.manifest["arguments"] if a["kind"] == "scalar"}
        if k in ("sgemm", "gemm_bf16"):
            m, n, kk = scalars["M"], scalars["N"], scalars["K"]
            out = b["A"].a.reshape(m, kk).astype(np.float32) @ b["B"].a.reshape(kk, n).astype(np.float32)
        elif k == "attention":
            bh, seq, causal, scale = scalars["bh"], scalars["seq"], scalars["causal"], scalars["scale"]
            q, kk_, v = (b[x].a.reshape(bh, seq, 64) for x in "QKV")
            sc = np.einsum("bqd,bkd->bqk", q, kk_) * np.float32(scale)
            if causal:
                sc = np.where(np.tril(np.ones((seq, seq), dtype=bool)), sc, -np.inf)
            p = np.exp(sc - sc.max(-1, keepdims=True))
            out = (p / p.sum(-1, keepdims=True)) @ v
        elif k == "conv2d":
            h, w, r = scalars["H"], scalars["W"], scalars["R"]
            padded = np.pad(b["in"].a.reshape(h, w), r // 2)
            f = b["filt"].a.reshape(r, r)
            out = sum(f[i, j] * padded[i:i + h, j:j + w] for i in range(r) for j in range(r))
        elif k == "bench_hub_convolution":
            h, w, r = s["H"], s["W"], s["R"]
            inp = b["input"].a.reshape(h + r - 1, w + r - 1)
            f = self.constants["d_filter"].a.reshape(r, r)  # the kernel reads its __constant__ copy
            out = sum(f[i, j] * inp[i:i + h, j:j + w] for i in range(r) for j in range(r))
        else:
            raise AssertionError(k)
        if k in self.wrong:
            out = np.asarray(out) * 1.01
        self.output().a[...] = np.asarray(out, dtype=np.float32).reshape(-1)
        fake_torch._Clock.now += KFORGE_MS[k]


def kforge(*args):
    r = subprocess.run([str(KFORGE), *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def render(kernel, folder):
    yaml = ROOT / "experiments/kernels" / kernel / "kernel.yaml"
    config = json.loads(kforge("space", str(yaml), "--json", "--list", "1").stdout)["list"][0]
    kforge("render", str(yaml), "--config", json.dumps(config), "--shape", json.dumps(SHAPES[kernel]),
           "--out", str(folder), "--no-compile")
    return config


@pytest.fixture
def emulated(monkeypatch):
    fake_torch.install(monkeypatch)
    monkeypatch.setattr(cuda_launch, "Variant", Emulated)
    monkeypatch.setattr(measure, "FLUSH_BYTES", 1024)
    monkeypatch.setattr(Emulated, "wrong", set())
    return Emulated


def measured(tmp_path, kernel, *extra):
    out = tmp_path / kernel / "final.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    search = tmp_path / "search.json"
    search.write_text(json.dumps({"trials": 12, "wall_s": 301.0, "budget_s": 300, "best": {"found_at_s": 42.0}}))
    assert measure.main([kernel, "--variant", str(tmp_path / "v"), "--search", str(search), "--rounds", "3",
                         "--calls", "2", "--out", str(out), *extra]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("kernel, expert_ms", [("sgemm", 1.0), ("gemm_bf16", 1.0), ("attention", 2.0)])
def test_measure_checks_and_times_every_candidate(tmp_path, emulated, kernel, expert_ms):
    config = render(kernel, tmp_path / "v")
    final = measured(tmp_path, kernel)
    k, e = final["kforge"], final["expert"]
    assert k["configuration"] == config and k["correct"], k
    assert e["correct"], e
    assert k["median_ms"] == pytest.approx(KFORGE_MS[kernel]) and e["median_ms"] == pytest.approx(expert_ms)
    assert k["calls"] == 6 and len(k["round_medians_ms"]) == 3
    assert final["ratio"] == pytest.approx(expert_ms / KFORGE_MS[kernel])
    assert final["met"] == (final["ratio"] >= measure.TARGETS[kernel]["ratio"])
    assert final["kforge_vs_expert_max_abs"] < 1e-3
    assert final["search"]["best"]["found_at_s"] == 42.0 and final["same_call_as_search"] is True
    if kernel == "attention":
        assert e["name"] == "torch sdpa fp32 (default dispatch: efficient_attention)"
    if kernel == "gemm_bf16":
        ref = next(r for r in final["candidates"] if r["role"] == "reference")
        assert ref["output_dtype"] == "bf16" and ref["correct"] and ref["name"] == "torch.matmul (cuBLAS, bf16 C)"
        assert e["name"] == "torch.mm(out_dtype=float32) (cuBLAS, f32 C)"
    # what the table reads
    row = table.render([table.load(tmp_path / kernel / "final.json")])
    assert f"| {kernel} |" in row and "12 in 301 (budget 300)" in row


def test_a_wrong_kforge_output_is_caught(tmp_path, emulated):
    render("sgemm", tmp_path / "v")
    emulated.wrong = {"sgemm"}
    final = measured(tmp_path, "sgemm")
    assert final["kforge"]["correct"] is False and final["kforge"]["wrong_elements"] > 0
    assert final["expert"]["correct"] and final["met"] is False


@pytest.mark.skipif(not (CONV / "T1.json").exists(), reason=f"{CONV} is absent (../shared/data)")
def test_conv2d_against_benchmark_hub_and_cudnn(tmp_path, emulated):
    render("conv2d", tmp_path / "v")
    bh = tmp_path / "bh"
    s = SHAPES["conv2d"]
    assert bench_hub.main([str(CONV), "--recording", str(RECORDING), "--height", str(s["H"]), "--width", str(s["W"]),
                           "--filter", str(s["R"]), "--top", "2", "--out", str(bh)]) == 0
    for i in range(2):
        kforge("render", str(bh / "kernel.yaml"), "--config", f"@{bh}/config-{i}.json", "--out", str(bh / f"render-{i}"),
               "--no-compile")
    final = measured(tmp_path, "conv2d", "--bench-hub", str(bh / "render-0"), str(bh / "render-1"),
                     "--bench-hub-configs", str(bh / "configs.jsonl"))
    rows = {r["name"]: r for r in final["candidates"]}
    assert all(r["correct"] for r in rows.values()), rows
    assert final["expert"]["name"].startswith("benchmark_hub convolution #0 (bx 64, by 1, tx 2, ty 4")
    assert final["expert"]["median_ms"] == pytest.approx(2.0)
    assert rows["torch conv2d fp32, TF32 off (cuDNN, benchmark mode)"]["median_ms"] == pytest.approx(40.0)
    assert final["ratio"] == pytest.approx(0.5) and final["met"] is False
    assert "rank 1 of the H200 recording at 4096^2" in rows[[n for n in rows if "#1" in n][0]]["note"]
