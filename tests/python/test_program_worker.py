"""The program worker (python/kforge/triton/program_worker.py) on its fake device: protocol, knobs,
comparison of every returned tensor and written argument, poisoning, statistics, failures as statuses."""
import dataclasses
import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kforge.triton import program_devices, program_worker as pw

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
WORKER = HERE.parents[1] / "python" / "kforge" / "triton" / "program_worker.py"
FAST = {"warmup": 1, "min_repeats": 5, "max_repeats": 10, "target_rel_ci": 1.0, "max_seconds": 1.0,
        "flush_l2": True}


def request(mode=None, call="axpy", inputs="axpy_shapes", knobs=None, **extra):
    knobs = list(knobs or [])
    if mode is not None:
        knobs.append({"kind": "literal", "site": "axpy", "target": "MODE", "value": mode})
    return {"op": "evaluate", "id": 1, "program": str(PROGRAMS / "fake_ops.py"), "call": call,
            "inputs": {"file": str(PROGRAMS / "fake_inputs.py"), "function": inputs}, "knobs": knobs,
            "seed": 3, "timing": FAST, **extra}


@pytest.fixture()
def worker(tmp_path):
    return pw.Worker(program_devices.FakeDevice(0), str(tmp_path))


def test_correct_variant_is_ok_and_timed(worker):
    out = worker.evaluate(request(0, knobs=[{"kind": "launch", "site": "axpy", "target": "num_warps",
                                             "value": 8}], profile=True, profile_calls=3))
    assert out["status"] == "ok", out["error"]
    assert 5 <= len(out["times_ms"]) <= 10 and all(t >= 0 for t in out["times_ms"])
    m = out["metrics"]
    assert m["time.repeats.shape2"] == len(out["times_ms"])
    assert m["kernels.count.shape2"] == 1
    assert m["time.kernels_ms.shape2"] == pytest.approx(0.008)  # the fake kernel reports 1 us per warp
    assert {"setup.worker_start_s", "setup.inputs_s", "setup.reference_s"} <= m.keys()  # the setup's account
    assert not any(k.startswith("setup.") for k in worker.evaluate(request(0))["metrics"])  # ... once


def test_the_profiler_starts_once_beside_the_setup_before_the_exclusive_lock(worker, monkeypatch):
    events = []
    hold = worker.lock.hold
    monkeypatch.setattr(worker.lock, "hold", lambda exclusive: events.append(("lock", exclusive)) or hold(exclusive))
    activity = program_devices.FakeDevice.kernel_activity
    monkeypatch.setattr(program_devices.FakeDevice, "kernel_activity",
                        lambda self, *a: events.append(("profiler",)) or activity(self, *a))
    assert worker.evaluate(request(0))["status"] == "ok"
    assert ("profiler",) not in events          # no profile asked: no start
    events.clear()
    out = worker.evaluate(request(0, profile=True, profile_calls=1))
    assert out["status"] == "ok" and {"setup.profiler_s", "setup.profiler_wait_s"} <= out["metrics"].keys()
    # the start (in its thread, beside the setup) before the exclusive lock, then the profile itself
    first_exclusive = events.index(("lock", True))
    assert events[:first_exclusive].count(("profiler",)) == 1 and events[first_exclusive:] == [("lock", True), ("profiler",)]
    events.clear()
    out = worker.evaluate(request(0, profile=True, profile_calls=1))
    assert events.count(("profiler",)) == 1 and "setup.profiler_s" not in out["metrics"]   # the real one only


def test_the_profiler_start_runs_beside_the_setup(worker, monkeypatch):
    """Each side waits (up to 5 s) for the other to have begun: both see the other only if the start runs
    beside the setup, not before it or after it."""
    import threading
    start_began, reference_began, seen = threading.Event(), threading.Event(), {}

    def start(self, *a):
        start_began.set()
        seen["start saw the reference"] = reference_began.wait(timeout=5)
        return [[]]

    def reference(*a):
        reference_began.set()
        seen.setdefault("reference saw the start", start_began.wait(timeout=5))
        return real_reference(*a)

    real_reference = worker._reference
    monkeypatch.setattr(program_devices.FakeDevice, "kernel_activity", start)
    monkeypatch.setattr(worker, "_reference", reference)
    out = worker.evaluate(request(0, profile=True, profile_calls=1))
    assert out["status"] == "ok" and seen == {"start saw the reference": True, "reference saw the start": True}
    assert 0 <= out["metrics"]["setup.profiler_wait_s"] <= out["metrics"]["setup.profiler_s"]


def test_the_l2_flush_is_do_benchs_at_least():
    # do_bench's 256 MiB on an H100 or H200 (50 MiB of L2: twice it would be 100 MiB, whose rewrite is too
    # short to hide a Python call's launch); twice the L2 where that is more.
    assert program_devices.flush_bytes(50 << 20) == 256 << 20
    assert program_devices.flush_bytes(200 << 20) == 400 << 20
    assert program_devices.FakeDevice(0).describe()["flush_bytes"] == 256 << 20


def test_metrics_of_the_launched_kernels(worker):
    out = worker.evaluate(request(0, profile=True, metrics=["fake__kernels.sum"]))
    assert out["status"] == "ok" and out["metrics"]["fake__kernels.sum"] == 1.0


@pytest.mark.parametrize("mode, status, words", [
    (1, "wrong_result", "returned[0]: 1 of 7 elements differ; first at (6,)"),
    (2, "wrong_result", "returned[0]: 7 of 7 elements differ"),   # unwritten: the poisoned pool shows
    (6, "launch_failed", "out of resources"),
    (7, "wrong_result", "argument 0: 1 of 7 elements differ; first at (0,)"),
    (9, "timeout", "took longer than 10 s"),
])
def test_faults_are_statuses(worker, mode, status, words):
    out = worker.evaluate(request(mode))
    assert out["status"] == status
    assert words in out["error"]
    assert not out["fatal"] and out["times_ms"] == []


def test_within_tolerance_is_ok_and_tolerance_is_per_dtype(worker):
    assert worker.evaluate(request(8))["status"] == "ok"
    out = worker.evaluate(request(8, tolerances={"f32": {"rel": 0, "abs": 0}}))
    assert out["status"] == "wrong_result"


def test_unwritten_output_passes_without_poisoning(worker, monkeypatch):
    # What the poisoning is for: without it the allocator's stale block holds the reference's result.
    monkeypatch.setattr(program_devices.FakeDevice, "poison_pool", lambda self, blocks, pattern=0: None)
    assert worker.evaluate(request(2))["status"] == "ok"


def test_device_fault_is_fatal(worker):
    out = worker.evaluate(request(5))
    assert out["status"] == "crashed" and out["fatal"]


def test_knob_that_does_not_apply_is_invalid(worker):
    out = worker.evaluate(request(knobs=[{"kind": "literal", "site": "axpy", "target": "NOPE", "value": 1}]))
    assert out["status"] == "invalid" and "NOPE" in out["error"]
    out = worker.evaluate(request(knobs=[{"kind": "launch", "site": "axpy", "target": "WIDTH", "value": 1}]))
    assert out["status"] == "invalid" and "not a tl.constexpr parameter" in out["error"]


def test_variant_that_does_not_import_is_compile_failed(worker):
    out = worker.evaluate(request(knobs=[{"kind": "literal", "site": "axpy", "target": "MODE",
                                          "value": "undefined_name + 1"}]))
    assert out["status"] == "launch_failed" and "undefined_name" in out["error"]
    out = worker.evaluate(request(knobs=[{"kind": "literal", "site": "axpy", "target": "MODE",
                                          "value": "(("}]))
    assert out["status"] == "compile_failed"


def test_written_arguments_are_found_and_only_write_only_ones_poisoned(worker):
    out = worker.evaluate(request(call="update", inputs="update_shapes"))
    assert out["status"] == "ok", out["error"]
    shape = worker.shapes[0]
    assert shape.written == {"argument 1", "argument 'dst'"}
    assert shape.write_only == {"argument 'dst'"}


def test_the_reference_keeps_one_copy_of_what_the_original_does_not_write(worker):
    # GPU memory bounds the workers per GPU (TritonBench-G: ten operators out of memory alone on an 80 GB
    # H100 with 4 workers): an argument the original leaves as it was is compared with the pristine input
    # itself, and the setup's peak is handed back once the reference is made.
    out = worker.evaluate(request(call="update", inputs="update_shapes"))
    assert out["status"] == "ok", out["error"]
    shape = worker.shapes[0]
    pristine = dict(worker._arg_tensors(shape.args, shape.kwargs))
    assert set(shape.ref_args) - shape.written  # an argument it only reads
    for path, ref in shape.ref_args.items():
        assert (ref is pristine[path]) == (path not in shape.written), path
    assert worker.device.releases == 1
    worker.evaluate(request(call="update", inputs="update_shapes"))
    assert worker.device.releases == 1  # once per setup
    # A candidate that writes an argument the original only reads is still caught (against the pristine).
    assert "argument 0: 1 of 7 elements differ" in worker.evaluate(request(7))["error"]


def test_bad_time_shape_is_invalid(worker):
    out = worker.evaluate(request(0, time_shapes=[5]))
    assert out["status"] == "invalid" and "3 shapes" in out["error"]


def test_statistics():
    assert pw.median([3, 1, 2]) == 2 and pw.median([4, 1, 2, 3]) == 2.5
    assert pw.relative_ci([1.0, 1.0]) == math.inf
    assert pw.relative_ci([1.0] * 20) == 0
    # Stops as soon as the interval is tight enough, after min_repeats.
    rounds = []
    samples = pw.adaptive_samples(lambda k: rounds.append(k) or [1.0] * k,
                                  {"min_repeats": 10, "max_repeats": 100, "target_rel_ci": 0.01,
                                   "max_seconds": 10})
    assert len(samples) == 10 and rounds == [5, 5]
    # Noisy samples run to max_repeats.
    noisy = iter([1.0, 3.0] * 100)
    samples = pw.adaptive_samples(lambda k: [next(noisy) for _ in range(k)],
                                  {"min_repeats": 10, "max_repeats": 23, "target_rel_ci": 0.01,
                                   "max_seconds": 10})
    assert len(samples) == 23
    s = pw.summarize_kernels([[("a", 1.0), ("b", 2.0)], [("a", 1.5), ("b", 2.0)], [("a", 1.0), ("b", 2.5)]])
    assert s == {"kernels_ms": 3.5, "count": 2, "names": ["a", "b"]}


def test_compare_values_walks_containers():
    dev = program_devices.FakeDevice(0)
    np = dev.np
    a = np.arange(4, dtype=np.float32)
    tol = {"f32": (1e-5, 1e-6)}
    assert pw.compare_values((a, {"k": a}), (a.copy(), {"k": a.copy()}), dev, tol) is None
    b = a.copy()
    b[2] = np.nan
    assert "returned[1]['k']: 1 of 4" in pw.compare_values((a, {"k": b}), (a, {"k": a}), dev, tol)
    assert "a tuple of 1" in pw.compare_values((a,), (a, a), dev, tol)
    assert "shape (3,)" in pw.compare_values(a[:3], a, dev, tol)
    assert pw.compare_values(np.array([np.nan]), np.array([np.nan]), dev, tol) is None  # NaN where ref is NaN
    assert "vs reference 3" in pw.compare_values(4, 3, dev, tol)
    i = np.arange(3, dtype=np.int32)
    assert pw.compare_values(i + 1, i, dev, tol).startswith("returned: 3 of 3")


def test_a_large_tensor_is_compared_in_blocks_with_the_same_verdict(monkeypatch):
    """Blocks bound the comparison's float64 temporaries (dropout_triton ran a worker out of GPU memory
    there); the mask, counts, first index and message are those of the whole-tensor comparison."""
    dev = program_devices.FakeDevice(0)
    np = dev.np
    rng = np.random.default_rng(5)
    ref = rng.standard_normal((6, 7, 5)).astype(np.float32)
    ref[0, 1, 2], ref[3, 3, 3] = np.nan, np.inf
    out = ref.copy()
    out[0, 1, 2] = np.nan                       # NaN where the reference is NaN: equal
    out[2, 4, 1] += 1.0                         # differs
    out[5, 6, 4] = np.nan                       # a new NaN
    out = np.ascontiguousarray(out.transpose(2, 0, 1)).transpose(1, 2, 0)  # not contiguous: copied flat
    ignore = np.zeros(ref.shape, dtype=bool)
    ignore[5, 6, 4] = True
    tol = (1e-5, 1e-6)
    with dev._quiet():
        whole = [dev._bad(out, ref, tol, None), dev._bad(out, ref, tol, ignore)]
    message = dev.compare("r", out, ref, tol)
    monkeypatch.setattr(program_devices, "COMPARE_BLOCK", 16)  # 210 elements: 14 blocks, the last short
    for mask, ig in zip(whole, (None, ignore)):
        with dev._quiet():
            assert np.array_equal(dev._bad(out, ref, tol, ig), mask)
    assert dev.mismatches(out, ref, tol) == 2 and dev.mismatches(out, ref, tol, ignore) == 1
    assert dev.compare("r", out, ref, tol) == message and message.startswith("r: 2 of 210 elements differ; first at (2, 4, 1)")
    assert dev.compare("r", out, ref, tol, ignore, allow=1) is None
    i = np.arange(40, dtype=np.int32)
    assert dev.mismatches(i, i, tol) == 0 and dev.mismatches(i + (i == 39), i, tol) == 1


def test_cut_program_and_apply_knobs():
    src = "def f(x):\n    B = 4\n    return x\n" + "#" * 20 + "\nresult = f(1)\n"
    cut = pw.cut_program(src, "####")
    assert "result" not in cut and pw.cut_program(src, None) == src
    assert "B = 64" in pw.apply_knobs(cut, [{"kind": "literal", "site": "f", "target": "B", "value": 64}])
    # The test code's top-level imports stay (a wrapper may use a module only the test code imports).
    src2 = "def f(x):\n    return torch.ones(x)\n" + "#" * 20 + "\nimport torch\nfrom os import path as p\nresult = f(1)\n"
    cut2 = pw.cut_program(src2, "####")
    assert cut2 == "def f(x):\n    return torch.ones(x)\nimport torch\nfrom os import path as p\n"


def test_knobs_as_parameters():
    params = pw.knobs_as_parameters((PROGRAMS / "fake_ops.py").read_text())
    by_name = {p["name"]: p for p in params}
    assert by_name["num_warps"]["knob"] == {"launch": "axpy:45"}
    assert by_name["MODE"]["knob"] == {"literal": "axpy:44"} and by_name["MODE"]["default"] == 0


def test_knobs_as_parameters_default_to_the_original_launch():
    """The default configuration is what the original launches with: the num_warps/num_stages the launch
    writes, else Triton's defaults (CUDAOptions' field defaults: 4 and 3 in Triton 3.6.0), not the first
    suggested value; a keyword written as an expression has no default."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
        fields = {f.name: f.default for f in dataclasses.fields(CUDAOptions)}
        triton_defaults = {"num_warps": fields["num_warps"], "num_stages": fields["num_stages"]}
    except ImportError:
        triton_defaults = {"num_warps": 4, "num_stages": 3}
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n    pass\n\n"
           "def run(x, nw):\n    k[(1,)](x, B=16)\n    k[(1,)](x, B=16, num_warps=8, num_stages=2)\n"
           "    k[(1,)](x, B=16, num_warps=nw)\n")
    by_name = {p["name"]: p for p in pw.knobs_as_parameters(src)}
    assert {p["knob"]["launch"] for p in by_name.values() if "launch" in p["knob"]} == {"run:9", "run:10", "run:11"}
    assert by_name["num_warps"]["knob"] == {"launch": "run:9"} and by_name["num_stages"]["knob"] == {"launch": "run:9"}
    assert by_name["num_warps"]["default"] == triton_defaults["num_warps"]
    assert by_name["num_stages"]["default"] == triton_defaults["num_stages"]
    assert by_name["num_warps_"]["knob"]["launch"] == "run:10"
    assert by_name["num_warps_"]["default"] == 8 and by_name["num_stages_"]["default"] == 2
    assert by_name["num_warps__"]["knob"]["launch"] == "run:11"
    assert by_name["num_warps__"]["default"] == pw.source_ops.AS_WRITTEN  # num_warps=nw: the source's own
    assert by_name["num_stages__"]["default"] == triton_defaults["num_stages"]
    # fake_ops.py's axpy writes num_warps=4 and no num_stages.
    fake = {p["name"]: p for p in pw.knobs_as_parameters((PROGRAMS / "fake_ops.py").read_text())}
    assert fake["num_warps"]["default"] == 4 and fake["num_stages"]["default"] == triton_defaults["num_stages"]


def test_options_a_wrapper_assigns_as_literals_start_at_the_original():
    """The wrapper's ``num_warps = 4`` passed as ``num_warps=num_warps``: the default configuration is the
    original's launch (before 2026-12-08 a second knob for the launch keyword started at 1 warp)."""
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n    pass\n\n"
           "def run(x):\n    BT, num_warps, num_stages = 64, 4, 2\n"
           "    k[(1,)](x, B=BT, num_warps=num_warps, num_stages=num_stages)\n")
    params = pw.knobs_as_parameters(src)
    assert [(p["name"], p.get("default"), p["knob"]) for p in params] == [
        ("BT", 64, {"literal": "run:9"}), ("num_warps", 4, {"literal": "run:9"}),
        ("num_stages", 2, {"literal": "run:9"})]
    assert pw.start_is_original(params)


def test_a_computed_launch_option_starts_as_the_source_computes_it():
    """``num_warps=nw`` (a parameter, ``ctx.num_warps``, a conditional): the default configuration leaves
    the expression in place, so the start is the original's launch (before 2026-12-08 it started at one
    warp: 41 of TritonBench-G's operators); its other values override it."""
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n    pass\n\n"
           "def run(x, big):\n    nw = 8 if big else 4\n    k[(1,)](x, B=16, num_warps=nw, num_stages=2)\n")
    params = pw.knobs_as_parameters(src)
    by_name = {p["name"]: p for p in params}
    assert by_name["num_warps"]["values"][0] == pw.source_ops.AS_WRITTEN
    assert by_name["num_warps"]["default"] == pw.source_ops.AS_WRITTEN
    assert pw.start_is_original(params)
    knobs = {p["name"]: {"kind": "launch", "site": p["knob"]["launch"], "target": p["name"], "value": p["default"]}
             for p in params}
    assert sorted(knobs) == ["B", "num_stages", "num_warps"]
    assert pw.apply_knobs(src, list(knobs.values())) == src  # every default is what the source writes
    overridden = pw.apply_knobs(src, [dict(knobs["num_warps"], value=2)])
    assert overridden == src.replace("num_warps=nw", "num_warps=2")


def test_a_parameter_default_the_callers_pass_is_no_parameter():
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n    pass\n\n"
           "def run(x, BLOCK=64, nw=4):\n    k[(1,)](x, B=BLOCK, num_warps=nw)\n")
    assert [(p["name"], p["default"], p["knob"]) for p in pw.knobs_as_parameters(src)] == [
        ("BLOCK", 64, {"literal": "run:8"}), ("nw", 4, {"literal": "run:8"}),
        ("num_stages", pw.source_ops.launch_defaults()["num_stages"], {"launch": "run:9"})]
    kept = pw.knobs_as_parameters(src, passed={"run": {"BLOCK"}, "other": {"nw"}})
    assert [p["name"] for p in kept] == ["nw", "num_stages"]
    knob = {"kind": "literal", "site": "run:8", "target": "BLOCK", "value": 128}
    assert pw.apply_knobs(src, [knob]) == src.replace("BLOCK=64", "BLOCK=128")


def test_a_launch_option_a_heuristic_computes_is_no_knob():
    src = ("import triton\nimport triton.language as tl\n\n"
           "@triton.heuristics({'num_warps': lambda args: 4 if args['n'] < 1024 else 8})\n"
           "@triton.jit\ndef k(x, n, B: tl.constexpr):\n    pass\n\n"
           "def w(x, n):\n    k[(1,)](x, n, B=16)\n")
    knobs = [(k["kind"], k["name"]) for k in pw.source_ops.find_knobs(src)]
    assert ("launch_keyword", "num_stages") in knobs and ("launch_keyword", "num_warps") not in knobs
    assert [p["name"] for p in pw.knobs_as_parameters(src)] == ["B", "num_stages"]


def test_start_configurations_are_the_original_then_its_autotune_lists():
    """`start:` is the original's configuration, then the other entries of its autotune lists (round robin
    over the kernels, the rest at their defaults, no repeats), at most `limit` in all."""
    src = ("import triton\nimport triton.language as tl\n\n"
           "@triton.autotune(configs=[triton.Config({'B': 64}, num_warps=4), triton.Config({'B': 128}, num_warps=8),\n"
           "    triton.Config({'B': 64}, num_warps=4), triton.Config({'B': 32}, num_warps=2)], key=['n'])\n"
           "@triton.jit\ndef k(x, n, B: tl.constexpr):\n    pass\n\n"
           "@triton.autotune(configs=[triton.Config({'C': 16}), triton.Config({'C': 8}, num_stages=2)], key=['n'])\n"
           "@triton.jit\ndef j(x, n, C: tl.constexpr):\n    pass\n\n"
           "@triton.jit\ndef plain(x, D: tl.constexpr):\n    pass\n\n"
           "def w(x, n):\n    k[(1,)](x, n)\n    j[(1,)](x, n)\n    plain[(1,)](x, D=4)\n")
    params = pw.knobs_as_parameters(src)
    names = [p["name"] for p in params]
    start = pw.start_configurations(src, params)
    assert start[0] == "default"
    # k's second entry with j's first (the default's), j's second with k's first (the default's), then
    # k's fourth (its third repeats its first); D stays at the launch's 4.
    by = {p["name"]: p for p in params}
    k_warps = next(p["name"] for p in params if p["name"].startswith("num_warps") and p["knob"].get("autotune") == "k")
    j_stages = next(p["name"] for p in params if p["name"].startswith("num_stages") and p["knob"].get("autotune") == "j")
    assert [(m["B"], m[k_warps], m["C"], m[j_stages], m["D"]) for m in start[1:]] == [
        (128, 8, 16, 3, 4), (64, 4, 8, 2, 4), (32, 2, 16, 3, 4)]
    assert all(set(m) == set(names) for m in start[1:]) and by["D"]["default"] == 4
    assert pw.start_configurations(src, params, limit=2) == start[:2]
    # A program without an autotune list starts from its default alone.
    plain = pw.knobs_as_parameters((PROGRAMS / "fake_ops.py").read_text())
    assert pw.start_configurations((PROGRAMS / "fake_ops.py").read_text(), plain) == ["default"]


def test_a_heuristic_flag_stating_a_fact_about_the_arguments_is_no_parameter():
    src = ("import triton\nimport triton.language as tl\n\n@triton.heuristics({\n"
           "    \"EVEN_K\": lambda args: args[\"K\"] % args[\"BLOCK_K\"] == 0,\n"
           "    \"FAST\": lambda args: True == True,\n})\n"
           "@triton.jit\ndef k(x, K, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, FAST: tl.constexpr):\n    pass\n\n"
           "def w(x):\n    k[(1,)](x, 8, BLOCK_K=64)\n")
    knobs = {k["name"]: k for k in pw.source_ops.find_knobs(src)}
    assert knobs["EVEN_K"]["argument_fact"] and not knobs["FAST"]["argument_fact"]
    names = [p["name"] for p in pw.knobs_as_parameters(src)]
    assert "EVEN_K" not in names and "FAST" in names and "BLOCK_K" in names


def test_protocol_over_pipes(tmp_path):
    lines = [{"op": "hello"}, request(0), request(1), {"op": "frobnicate", "id": 9}, request(5), request(0)]
    p = subprocess.run([sys.executable, str(WORKER), "--fake", "--cache", str(tmp_path)],
                       input="".join(json.dumps(x) + "\n" for x in lines), capture_output=True, text=True,
                       timeout=60)
    answers = [json.loads(line) for line in p.stdout.splitlines()]
    assert answers[0]["worker"] == "program" and answers[0]["name"] == "fake device"
    assert [a["status"] for a in answers[1:]] == ["ok", "wrong_result", "crashed", "crashed"]
    assert "unknown op" in answers[3]["error"] and not answers[3]["fatal"]
    assert answers[4]["fatal"] and p.returncode == 3   # the worker exits after a fatal answer
    assert "a program's print goes to the log" in p.stderr


def test_string_constexpr_annotations_are_constexprs():
    # TritonBench-G writes `BLOCK_SIZE: "tl.constexpr"`; Triton reads it as a constexpr, and so must the knobs.
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, BLOCK_SIZE: \"tl.constexpr\"):\n"
           "    pass\n\ndef w(x):\n    B = 64\n    k[(1,)](x, B)\n")
    out = pw.apply_knobs(src, [{"kind": "launch", "site": "w", "target": "BLOCK_SIZE", "value": 32}])
    assert "k[(1,)](x, 32)" in out


def test_answers_carry_no_nan(tmp_path):
    import io
    out = io.StringIO()
    worker = pw.Worker(program_devices.FakeDevice(0), str(tmp_path))
    worker.evaluate = lambda req: {"id": 1, "status": "ok", "metrics": {"a": math.nan, "b": [math.inf, 1.0]}}
    pw.serve(worker, [json.dumps({"op": "evaluate", "id": 1})], out)
    assert json.loads(out.getvalue()) == {"id": 1, "status": "ok", "metrics": {"a": None, "b": [None, 1.0]}}


def test_elements_the_original_never_writes_are_not_compared(worker):
    def padded(pad):
        return request(call="padded", knobs=[{"kind": "literal", "site": "padded", "target": "PAD", "value": pad}])
    assert worker.evaluate(padded(2))["status"] == "ok"   # reproducible once its padding is set aside
    assert worker.evaluate(padded(0))["status"] == "ok"   # a candidate may write the padding
    out = worker.evaluate(padded(3))                      # ... but must write what the original writes
    assert out["status"] == "wrong_result" and "returned: 1 of 7 elements differ; first at (4,)" in out["error"]
    dev = program_devices.FakeDevice(0)
    import numpy as np
    a, b = np.array([np.nan, 1.0, np.nan]), np.array([4096.0, 1.0, 2.0])
    assert dev.unwritten(a, b).tolist() == [True, False, False]
    assert dev.unwritten(a[1:], b[1:]) is None and dev.unwritten(a, b[:2]) is None
    assert pw.unwritten_masks((a, {"k": a}), (b, {"k": b}), dev).keys() == {"returned[0]", "returned[1]['k']"}


def test_an_original_that_does_not_reproduce_itself_is_said_so(worker):
    out = worker.evaluate(request(call="noisy"))
    assert out["status"] == "launch_failed"
    assert "not reproducible" in out["error"] and "candidates cannot be checked" in out["error"]
    assert out["original_failed"] and "original_failed" not in worker.evaluate(request(0))


def test_numbers_a_program_draws_itself_are_the_same_in_every_compared_call(worker):
    out = worker.evaluate(request(call="draws"))
    assert out["status"] == "ok", out["error"]  # without the seeding: "not reproducible"


def test_a_compile_inside_a_check_lets_go_of_the_shared_lock(tmp_path, monkeypatch):
    """Triton's compiles run inside the worker's ``_compiling`` context (bounded_compile.around): under a
    shared hold another process may take the lock exclusively meanwhile, and the hold is back after; an
    exclusive hold (a timing) is never let go."""
    import fcntl
    monkeypatch.setenv("KFORGE_LOCK_DIR", str(tmp_path))
    w = pw.Worker(program_devices.FakeDevice(0), str(tmp_path / "cache"))
    from kforge.triton import bounded_compile
    assert bounded_compile._around == w._compiling  # what every compile of this worker enters
    other = pw.DeviceLock(w.lock.path.rsplit("kforge-gpu-", 1)[1][:-len(".lock")])
    assert other.path == w.lock.path

    def other_can_take_it_exclusively():
        try:
            fcntl.flock(other.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(other.fd, fcntl.LOCK_UN)
        return True

    synchronized = []
    monkeypatch.setattr(w.device, "synchronize", lambda: synchronized.append(True))
    with w.lock.hold(exclusive=False):
        assert not other_can_take_it_exclusively()
        with w._compiling():
            assert synchronized and other_can_take_it_exclusively()
        assert not other_can_take_it_exclusively() and w.lock.mode == fcntl.LOCK_SH
    with w.lock.hold(exclusive=True):
        with w._compiling():
            assert not other_can_take_it_exclusively()
    assert other_can_take_it_exclusively()
    bounded_compile.around(None)  # not left to later tests


@pytest.mark.parametrize("inputs, status", [("widen_shapes", "ok"), ("widen_shapes_f32", "wrong_result")])
def test_results_from_low_precision_inputs_get_that_precisions_tolerance(worker, inputs, status):
    """An f32 result off by 1e-3 relative passes when the call's input is f16 (f16's tolerance: 1e-2
    relative), not when it is f32 (1e-5)."""
    knob = [{"kind": "literal", "site": "widen", "target": "MODE", "value": 1}]
    out = worker.evaluate(request(call="widen", inputs=inputs, knobs=knob))
    assert out["status"] == status, out["error"]


def test_call_tolerances():
    tol = pw.DEFAULT_TOLERANCES
    assert pw.call_tolerances(tol, set()) == tol
    assert pw.call_tolerances(tol, {"f32"}) == {**tol, "f64": tol["f32"]}  # f64 from f32 data: f32's
    mixed = pw.call_tolerances(tol, {"f32", "f16"})
    assert mixed["f32"] == tol["f16"] and mixed["f16"] == tol["f16"] and mixed["bf16"] == tol["bf16"]
    assert pw.call_tolerances(tol, {"bf16"})["f16"] == (2e-2, 1e-2)  # the looser of each component


def test_an_original_with_a_small_race_serves_with_an_allowance(tmp_path):
    # The original changes one element per call (of 500 and 1000): under 1%, so it serves as the reference
    # and a candidate may differ in twice as many elements as its own calls did.
    worker = pw.Worker(program_devices.FakeDevice(0), str(tmp_path))

    def racy(race):
        return request(call="racy", inputs="wide_shapes",
                       knobs=[{"kind": "literal", "site": "racy", "target": "RACE", "value": race}])
    out = worker.evaluate(racy(1))  # the original itself, racing as before
    assert out["status"] == "ok", out["error"]
    assert out["metrics"]["setup.original_unstable_elements"] >= 2  # counted on both sizes
    assert worker.evaluate(racy(2))["status"] == "ok"  # two elements off: within the allowance
    wrong = worker.evaluate(racy(9))  # nine elements off: more than the original ever differs
    assert wrong["status"] == "wrong_result" and "allowed, as the original differs from itself" in wrong["error"]
    # Two elements left unwritten (the poison, NaN) are within the count, but an allowance never covers them.
    left = worker.evaluate(request(call="racy", inputs="wide_shapes",
                                   knobs=[{"kind": "literal", "site": "racy", "target": "LEFT", "value": 2}]))
    assert left["status"] == "wrong_result" and "nan" in left["error"]
    assert "2 of them NaN where the reference has a number, which no allowance covers" in left["error"], left["error"]


def test_a_race_seen_at_one_size_is_allowed_for_at_every_size(tmp_path):
    # The original races on its 1000 elements (two elements differ between its calls: 0.2%) and its two
    # calls on 500 agree; the allowance at 500 is twice that share of its elements (2), not zero.
    worker = pw.Worker(program_devices.FakeDevice(0), str(tmp_path))

    def candidate(quiet_below, race=1):
        return request(call="racy_large", inputs="wide_shapes",
                       knobs=[{"kind": "literal", "site": "racy_large", "target": "QUIET_BELOW", "value": quiet_below},
                              {"kind": "literal", "site": "racy_large", "target": "RACE", "value": race}])
    assert worker.evaluate(candidate(1000))["status"] == "ok"  # the original's configuration
    assert [s.allow for s in worker.shapes] == [{"returned": 2}, {"returned": 4}]
    assert [s.unstable["returned"] for s in worker.shapes] == [(0, 500), (2, 1000)]
    assert worker.evaluate(candidate(0))["status"] == "ok"  # one element off at 500: the race, allowed
    wrong = worker.evaluate(candidate(0, race=3))  # three off at 500: beyond twice the share
    assert wrong["status"] == "wrong_result" and "2 allowed" in wrong["error"], wrong["error"]


def test_an_original_unstable_in_more_than_one_percent_is_not_reproducible(tmp_path):
    worker = pw.Worker(program_devices.FakeDevice(0), str(tmp_path))
    out = worker.evaluate(request(call="racy", inputs="axpy_shapes"))  # one element of 7: 14%
    assert out["status"] == "launch_failed" and out["original_failed"]
    assert "not reproducible" in out["error"] and "up to 1% of a value's elements" in out["error"]


def test_the_torch_device_hands_back_its_cache_and_says_what_it_held():
    calls = []
    cuda = types.SimpleNamespace(empty_cache=lambda: calls.append("empty_cache"),
                                 memory_reserved=lambda dev: 3 * 2**30,
                                 max_memory_reserved=lambda dev: 12 * 2**30)
    dev = object.__new__(program_devices.TorchDevice)  # no GPU here: only the allocator's calls
    dev.torch, dev.dev = types.SimpleNamespace(cuda=cuda), "cuda:0"
    dev.release_cached_memory()
    assert calls == ["empty_cache"]
    assert dev.memory_account() == {"setup.gpu_reserved_gib": 3.0, "setup.gpu_reserved_peak_gib": 12.0}


def test_released_inputs_are_made_again_by_the_next_check(worker):
    # The TritonBench-G final measurement checks its winners, then needs the GPU's memory for its timing.
    assert worker.evaluate(request(0))["status"] == "ok"
    assert worker.shapes and worker.device.releases == 1
    worker.release_inputs()
    assert worker.shapes == [] and worker.device.releases == 2
    out = worker.evaluate(request(0))
    assert out["status"] == "ok" and worker.shapes
    assert {"setup.inputs_s", "setup.reference_s"} <= out["metrics"].keys()  # the setup ran again
    assert worker.evaluate(request(7))["status"] == "wrong_result"  # and checks against a fresh reference


def test_releasing_inputs_on_a_broken_gpu_does_not_raise(worker, monkeypatch):
    assert worker.evaluate(request(0))["status"] == "ok"

    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(worker.device, "release_cached_memory", broken)
    worker.release_inputs()
    assert worker.shapes == [] and worker.inputs_key is None and worker.reference_key is None


def test_the_setup_says_which_knobs_never_ran(worker):
    """The original's reference calls are traced: a launch on a branch the inputs never take and a default
    of a wrapper nothing calls are knobs that did not run; a multi-line launch that ran and a default of a
    function that ran did."""
    source = (PROGRAMS / "fake_branches.py").read_text()
    params = pw.knobs_as_parameters(source)
    knobs = [{"kind": next(iter(p["knob"])), "site": next(iter(p["knob"].values())),
              "target": p["knob"].get("target", p["name"]), "value": p.get("default", p["values"][0])}
             for p in params if {"launch", "literal"} & set(p["knob"])]
    sites = {(k["target"], k["site"]) for k in knobs}
    assert {("num_warps", "branchy:16"), ("num_warps", "branchy:18"), ("BLOCK", "branchy:13"),
            ("TILE", "unused:23")} <= sites
    out = worker.evaluate({**request(program=str(PROGRAMS / "fake_branches.py")), "call": "branchy",
                           "knobs": knobs})
    assert out["status"] == "ok", out["error"]
    m = out["metrics"]
    assert m["setup.knob_sites"] == len(sites)
    not_run = sorted(k[len("setup.knob_not_run."):] for k in m if k.startswith("setup.knob_not_run."))
    assert not_run == sorted(f"{t}@{s}" for t, s in sites if s == "branchy:16" or s.startswith("unused:"))
    assert "num_warps@branchy:18" not in not_run and "BLOCK@branchy:13" not in not_run
    assert m["setup.knobs_not_run"] == len(not_run)
