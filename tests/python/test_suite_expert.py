"""The device side of the suite against the experts (scripts/device-suite) without a GPU: kforge.suite.search on
synthetic runs, kforge.suite.bench_hub on synthetic and (where ../shared/data exists) the real convolution
files, kforge.suite.cuda_launch's binding checks, kforge.suite.measure's pure parts, and, where this build's
kforge exists, `kforge render` of every measured kernel bound to the harness's buffers by `measure --fake`."""
import ctypes
import gzip
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kforge.suite import bench_hub, cuda_launch, measure, search

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KFORGE_SHARED_DATA", ROOT.parent / "shared" / "data"))
CONV = SHARED / "tuning-spaces" / "benchmark_hub" / "convolution"
RECORDING = ROOT / "experiments/benchmark_hub/h200/convolution-H200.json.gz"
KFORGE = Path(os.environ.get("KFORGE_BUILD_DIR", ROOT / "build")) / "kforge"


def trial(seq, status, ms, clock, config):
    return {"sequence": seq, "status": status, "time_ms": ms, "clock_s": clock, "configuration": config,
            "metrics": {}, "error": ""}


ROWS = [trial(0, "ok", 5.0, 1.0, {"a": 1}), trial(1, "compile_failed", float("nan"), 2.0, {"a": 2}),
        trial(2, "ok", 2.0, 30.5, {"a": 3}), trial(3, "ok", 2.0, 40.0, {"a": 4}), trial(4, "invalid", 0, 41.0, {"a": 5})]
META = {"run": {"strategy": {"type": "hybrid", "params": {}}, "seed": 1},
        "finished": {"reason": "wall_time", "setup_s": 7.5}, "interrupted": None, "failed": None}


def test_search_summary_counts_and_dates_the_best():
    s = search.summarise(ROWS, META, 300)
    assert s["trials"] == 5 and s["statuses"] == {"compile_failed": 1, "invalid": 1, "ok": 3}
    # the tie at 2.0 ms goes to the earlier trial; found at its clock plus the evaluator's setup
    assert s["best"] == {"configuration": {"a": 3}, "time_ms_in_run": 2.0, "sequence": 2, "clock_s": 30.5,
                         "found_at_s": 38.0}
    assert s["wall_s"] == 48.5 and s["strategy"] == "hybrid" and s["seed"] == 1 and s["ended"] == "finished"
    assert s["strategy_params"] == {} and s["end_reason"] == "wall_time" and s["budget_s"] == 300


def test_search_main_reads_the_store_and_writes_the_best(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    con = sqlite3.connect(run / "run.sqlite")
    con.execute("create table meta (key text primary key, value text)")
    for k, v in META.items():
        con.execute("insert into meta values (?, ?)", (k, json.dumps(v)))
    con.commit()
    con.close()
    trials = tmp_path / "t.jsonl"
    trials.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out, best = tmp_path / "search.json", tmp_path / "best.json"
    assert search.main([str(trials), str(run), "--budget-s", "300", "--out", str(out), "--best", str(best)]) == 0
    assert json.loads(best.read_text()) == {"a": 3}
    assert json.loads(out.read_text())["best"]["found_at_s"] == 38.0
    assert "best 2.0000 ms at 38 s (trial 2)" in capsys.readouterr().out


def test_search_main_without_an_ok_trial_or_with_a_bad_line(tmp_path, capsys):
    trials = tmp_path / "t.jsonl"
    trials.write_text(json.dumps(ROWS[1]) + "\n")
    best = tmp_path / "best.json"
    assert search.main([str(trials), str(tmp_path), "--out", str(tmp_path / "s.json"), "--best", str(best)]) == 1
    assert not best.exists() and "no ok trial among 1" in capsys.readouterr().err
    trials.write_text(json.dumps(ROWS[0]) + "\n{oops\n")
    assert search.main([str(trials), str(tmp_path), "--out", str(tmp_path / "s.json"), "--best", str(best)]) == 2
    assert f"{trials}:2: not JSON" in capsys.readouterr().err


SOURCE = "#define image_height 4096\n#define image_width 4096\n__global__ void k() {}\n"


def test_resize_source_sets_both_defines_once():
    out = bench_hub.resize_source(SOURCE, 8192, 6000)
    assert out.startswith("#define image_height 8192\n#define image_width 6000\n")
    with pytest.raises(bench_hub.BenchHubError, match="one '#define image_width <number>' line, found 0"):
        bench_hub.resize_source("#define image_height 4096\n", 1, 1, "f.cu")
    with pytest.raises(bench_hub.BenchHubError, match="found 2"):
        bench_hub.resize_source(SOURCE + "#define image_height 2\n", 1, 1)


def test_top_configurations_by_median_then_time():
    cache = {"cache": {
        "1": {"p": 1, "time": 3.0, "time_median": 1.0},
        "2": {"p": 2, "time": 0.5},                     # no median: its mean
        "3": {"p": 3, "time": "InvalidConfig"},         # not timed
        "4": {"p": 4, "time": 9.0, "time_median": 2.0},
    }}
    got = bench_hub.top_configurations(cache, ["p"], 2)
    assert got == [{"configuration": {"p": 2}, "recorded_ms": 0.5}, {"configuration": {"p": 1}, "recorded_ms": 1.0}]
    with pytest.raises(bench_hub.BenchHubError, match="no configuration with a valid time"):
        bench_hub.top_configurations({"cache": {"3": cache["cache"]["3"]}}, ["p"], 2)
    with pytest.raises(bench_hub.BenchHubError, match="lacks"):
        bench_hub.top_configurations(cache, ["p", "q"], 2)


def test_bench_hub_main_names_a_missing_folder(tmp_path, capsys):
    rec = tmp_path / "r.json.gz"
    with gzip.open(rec, "wt") as f:
        json.dump({"cache": {}}, f)
    assert bench_hub.main([str(tmp_path / "nope"), "--recording", str(rec), "--height", "8", "--width", "8",
                           "--filter", "3", "--out", str(tmp_path / "o")]) == 2
    assert "T1.json: cannot read" in capsys.readouterr().err


class Stand:
    def __init__(self, n, size):
        self.n, self.size = n, size

    def numel(self):
        return self.n

    def element_size(self):
        return self.size


MANIFEST = {"kernel": "k", "shape": {}, "launch": {}, "arguments": [
    {"name": "n", "kind": "scalar", "type": "i32", "value": 7, "param": True, "constant": False},
    {"name": "x", "kind": "buffer", "type": "f32", "count": 7, "role": "in", "param": True, "constant": False},
    {"name": "y", "kind": "buffer", "type": "bf16", "count": 7, "role": "out", "param": True, "constant": False},
    {"name": "c", "kind": "constant", "type": "f32", "count": 3, "param": False, "constant": True},
]}


def test_bind_orders_parameters_and_checks_every_buffer():
    plan = cuda_launch.bind(MANIFEST, {"x": Stand(7, 4), "y": Stand(7, 2)}, {"c": Stand(3, 4)})
    assert plan == {"params": [("scalar", "n", "i32", 7), ("buffer", "x", "f32", None), ("buffer", "y", "bf16", None)],
                    "uploads": [("c", 12)], "outputs": ["y"]}
    with pytest.raises(ValueError, match="argument x: the kernel expects 7 elements, the harness's buffer has 6"):
        cuda_launch.bind(MANIFEST, {"x": Stand(6, 4), "y": Stand(7, 2)}, {"c": Stand(3, 4)})
    with pytest.raises(ValueError, match=r"argument y: the kernel reads bf16 \(2 bytes\)"):
        cuda_launch.bind(MANIFEST, {"x": Stand(7, 4), "y": Stand(7, 4)}, {"c": Stand(3, 4)})
    with pytest.raises(ValueError, match="argument c: the harness has no constant"):
        cuda_launch.bind(MANIFEST, {"x": Stand(7, 4), "y": Stand(7, 2)})


def test_bind_passes_tensor_maps_in_order_and_checks_their_buffer():
    tm = {"name": "tmX", "kind": "tensor_map", "type": "f32", "param": True, "constant": False, "enabled": True,
          "buffer": "x", "dims": [7], "strides_bytes": [], "box": [4], "swizzle": 0, "l2_promotion": 0,
          "oob_fill": "zero"}
    off = {"name": "tmY", "kind": "tensor_map", "type": "bf16", "param": True, "constant": False, "enabled": False}
    manifest = dict(MANIFEST, arguments=MANIFEST["arguments"][:3] + [tm, off])
    plan = cuda_launch.bind(manifest, {"x": Stand(7, 4), "y": Stand(7, 2)})
    assert plan["params"][3:] == [("tensor_map", "tmX", "f32", tm), ("tensor_map", "tmY", "bf16", off)]
    with pytest.raises(ValueError, match="argument tmX: the tensor map views buffer q"):
        cuda_launch.bind(dict(manifest, arguments=[dict(tm, buffer="q")]), {"x": Stand(7, 4)})
    # A disabled map is 128 zero bytes; no driver call is made for it.
    assert ctypes.sizeof(cuda_launch.TensorMap) == 128
    assert list(cuda_launch.encode_tensor_map(None, off, 0).opaque) == [0] * 16


def test_measure_rotation_stats_and_expert_choice():
    assert measure.rotation(3, 4) == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]
    s = measure.stats([1.0, 2.0, 3.0, 4.0, 100.0], [2.0, 3.0])
    assert s["median_ms"] == 3.0 and s["min_ms"] == 1.0 and s["max_ms"] == 100.0 and s["calls"] == 5
    assert s["round_medians_ms"] == [2.0, 3.0]
    rows = [{"role": "kforge", "median_ms": 1}, {"role": "expert", "median_ms": 0.5, "correct": False},
            {"role": "expert", "median_ms": 0.9, "correct": True}, {"role": "reference", "median_ms": 0.1}]
    assert measure.choose_expert(rows)["median_ms"] == 0.9
    assert measure.choose_expert(rows[:2])["median_ms"] == 0.5
    assert measure.choose_expert(rows[:1]) is None
    assert measure.buffer_layout("conv2d", {"H": 4, "W": 5, "R": 3}) == {
        "in": (20, "f32", "uniform"), "filt": (9, "f32", "normal"), "out": (20, "f32", "out")}


needs_kforge = pytest.mark.skipif(not KFORGE.exists(), reason=f"{KFORGE} was not built")


def kforge(*args):
    return subprocess.run([str(KFORGE), *args], capture_output=True, text=True, timeout=300)


def run_measure(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "kforge.suite.measure", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@needs_kforge
@pytest.mark.parametrize("kernel", ["sgemm", "gemm_bf16", "attention", "conv2d"])
def test_rendered_default_binds_to_the_harness(tmp_path, kernel):
    """The kernel description's arguments at its time shape are the buffers the harness allocates."""
    yaml = ROOT / "experiments/kernels" / kernel / "kernel.yaml"
    space = json.loads(kforge("space", str(yaml), "--json", "--list", "1").stdout)
    defaults = {p["name"]: None for p in space["params"]}
    # the first listed valid configuration (all parameters given)
    config = space["list"][0]
    assert set(config) == set(defaults)
    r = kforge("render", str(yaml), "--config", json.dumps(config), "--out", str(tmp_path / "v"), "--no-compile")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "v/variant.json").read_text())
    assert m["kernel"] == kernel and m["configuration"] == config and m["roofline"]["floor_ms"] > 0
    r = run_measure(kernel, "--variant", str(tmp_path / "v"), "--out", str(tmp_path / "final.json"), "--fake")
    assert r.returncode == 0, r.stderr
    final = json.loads((tmp_path / "final.json").read_text())
    assert final["fake"] is True and final["kforge"]["configuration"] == config
    assert final["target"] == measure.TARGETS[kernel]


@needs_kforge
@pytest.mark.skipif(not (CONV / "T1.json").exists(), reason=f"{CONV} is absent (../shared/data)")
def test_bench_hub_convolution_at_the_suite_shape_renders_and_binds(tmp_path):
    out = tmp_path / "bh"
    assert bench_hub.main([str(CONV), "--recording", str(RECORDING), "--height", "8192", "--width", "8192",
                           "--filter", "15", "--top", "2", "--out", str(out)]) == 0
    configs = [json.loads(line) for line in (out / "configs.jsonl").read_text().splitlines()]
    # the recording's optimum (docs/t1-kernels.md): bx 64, by 1, tx 2, ty 4, read_only 0, no padding
    assert configs[0]["configuration"]["block_size_x"] == 64 and configs[0]["recorded_ms"] == pytest.approx(0.2738, abs=1e-4)
    src = next(out.glob("*.cu")).read_text()
    assert "#define image_height 8192" in src and "#define image_width 8192" in src and "4096" not in src.split("\n")[0]
    r = kforge("render", str(out / "kernel.yaml"), "--config", f"@{out}/config-0.json", "--out", str(out / "render-0"))
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "render-0/variant.json").read_text())
    assert m["launch"]["grid"] == [8192 // 128, 8192 // 4, 1] and m["launch"]["block"] == [64, 1, 1]
    assert (out / "render-0/variant.cubin").stat().st_size > 0 and m["lowered_name"] != "convolution_kernel"
    # kforge's conv2d rendered at the same shape; the harness binds both
    yaml = ROOT / "experiments/kernels/conv2d/kernel.yaml"
    config = json.loads(kforge("space", str(yaml), "--json", "--list", "1").stdout)["list"][0]
    assert kforge("render", str(yaml), "--config", json.dumps(config), "--out", str(tmp_path / "v"),
                  "--no-compile").returncode == 0
    r = run_measure("conv2d", "--variant", str(tmp_path / "v"), "--bench-hub", str(out / "render-0"),
                    "--bench-hub-configs", str(out / "configs.jsonl"), "--out", str(tmp_path / "final.json"), "--fake")
    assert r.returncode == 0, r.stderr
    final = json.loads((tmp_path / "final.json").read_text())
    assert final["expert"]["name"] == ("benchmark_hub convolution #0 (bx 64, by 1, tx 2, ty 4, read_only 0, "
                                       "padding 0)")
