"""kforge.tritonbench_g without a GPU: a toy operator laid out as TritonBench-G's data (kernels/<op>.py with
a test block after a line of '#', perf/<op>_perf.py importing it as TritonBench_v1.<op>), numpy for tensors
and the program worker's fake device. Covers the importer (index, experiments), the harness (size selection,
the adapter rebinding the harness's imports to a variant), knobs_for, and one variant measured end to end
through the program worker with the generated inputs and adapter."""
import json
import os
import sys
import types

import pytest

np = pytest.importorskip("numpy")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from kforge.triton import program_devices, program_worker  # noqa: E402
from kforge.tritonbench_g import harness, importer, measure, runnable  # noqa: E402

KERNEL = '''import numpy as np
from kforge.triton.program_devices import fake_empty
from kforge.triton.program_devices import fake_tl as tl
from kforge.triton.program_devices import fake_triton as triton


@triton.jit
def add_kernel(x, y, out, n, BLOCK_SIZE: tl.constexpr):
    out[...] = x + y
    if BLOCK_SIZE == 2:
        out[0] += 1  # a planted fault: BLOCK_SIZE 2 is wrong


def toy_add(x, y):
    out = fake_empty(x.shape, x.dtype)
    BLOCK_SIZE = 4
    add_kernel[(1,)](x, y, out, x.size, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
''' + "#" * 146 + '''
def test_toy():
    raise SystemExit("the test block must never run")
result_gold = test_toy()
'''

PERF = '''import sys, os
sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), '..')))
from TritonBench_v1.toy import toy_add
from performance_utils import Performance_Metrics
import numpy as np


class performance_metrics(Performance_Metrics):
    def __init__(self):
        super().__init__('toy')

    def get_input_tensors(self):
        self.input_tensors = [(np.random.rand(2 ** i).astype(np.float32), np.random.rand(2 ** i).astype(np.float32))
                              for i in range(4, 9)]

    def to_cuda(self, input_tensor):
        return input_tensor

    def call_op(self, input_tensor):
        return toy_add(input_tensor[0], input_tensor[1])

    def get_gbps(self, input_tensor, runtime):
        return 3 * input_tensor[0].nbytes / (runtime / 1000) / 1e9

    def get_tflops(self, input_tensor, runtime):
        return None
'''

UTILS = '''class Performance_Metrics:
    def __init__(self, op_name, **kwargs):
        self.op_name = op_name
        self.input_tensors = []
'''


@pytest.fixture()
def data(tmp_path):
    d = tmp_path / "tritonbench-g"
    (d / "kernels").mkdir(parents=True)
    (d / "perf").mkdir()
    (d / "kernels" / "toy.py").write_text(KERNEL)
    (d / "kernels" / "plain.py").write_text("def f(x):\n    return x\n" + "#" * 146 + "\n")
    (d / "perf" / "toy_perf.py").write_text(PERF)
    (d / "perf" / "plain_perf.py").write_text("from TritonBench_v1.plain import f\n")
    (d / "perf" / "performance_utils.py").write_text(UTILS)
    (d / "TritonBench_G_v1.json").write_text(json.dumps([{"file": "toy.py", "output_triton_len": "812"}]))
    return d


def test_selection():
    assert harness.parse_selection("all", 4) == [0, 1, 2, 3]
    assert harness.parse_selection("spread:3", 14) == [0, 6, 13]
    assert harness.parse_selection("spread:3", 2) == [0, 1]
    assert harness.parse_selection("0,-1,0", 5) == [0, 4]
    with pytest.raises(IndexError):
        harness.parse_selection("7", 5)


def test_importer_writes_experiments_and_an_index(data, tmp_path):
    out = tmp_path / "campaign"
    assert importer.main([str(data), "--out", str(out), "--seconds", "12",
                          "--exclude", str(_write(tmp_path / "x.json", {"nope": "no reason"}))]) == 0
    index = {r["op"]: r for r in json.loads((out / "index.json").read_text())}
    assert index["toy"]["status"] == "ready" and index["toy"]["call"] == "toy_add"
    assert index["toy"]["length"] == 812
    assert index["plain"]["status"] == "no_knob" and not (out / "plain").exists()
    e = json.loads((out / "toy" / "kforge.json").read_text())
    names = [p["name"] for p in e["problem"]["parameters"]]
    assert names == ["BLOCK_SIZE", "num_warps", "num_stages"]
    assert e["problem"]["parameters"][0]["default"] == 4
    # The toy's launch writes neither keyword: the defaults are Triton's, so that `start: default` (both
    # arms) is the original's configuration.
    assert [p.get("default") for p in e["problem"]["parameters"][1:]] == [4, 3]
    assert e["start"] == ["default"]
    assert json.loads((out / "toy" / "random.json").read_text())["start"] == ["default"]
    assert 1024 in e["problem"]["parameters"][0]["values"]
    assert e["problem"]["adapter"].endswith("toy/harness.py:bind")
    assert e["budget"] == {"wall_time_s": 12.0, "wall_includes_setup": True, "wall_grace_s": 1.0}
    assert e["strategy"] == "hybrid"
    assert json.loads((out / "toy" / "random.json").read_text())["strategy"] == "random"
    assert e["evaluator"]["params"]["workers_per_device"] == 2 and e["evaluator"]["params"]["compile_timeout_s"] == 5.0
    # An operator that does not exist is a usage error.
    assert importer.main([str(data), "--out", str(out), "--ops", "toy,missing"]) == 2


def test_the_harness_passes_what_its_calls_fill():
    """passed_arguments: positional arguments fill the wrapper's parameters in order, keywords name theirs,
    an autograd Function's apply fills forward's after ctx, *args/**kwargs pass them all; calls of names
    the harness does not import from the operator do not count."""
    source = ("def wrap(x, y, BLOCK=64, nw=4, *, STAGES=2):\n    pass\n\n"
              "class Fn:\n    @staticmethod\n    def forward(ctx, x, block=32):\n        pass\n\n"
              "def other(x, BLOCK=8):\n    pass\n")
    perf = ("from TritonBench_v1.op import wrap, Fn\n\nclass P:\n    def call_op(self, t):\n"
            "        wrap(t, t, 128)\n        wrap(t, t, nw=8)\n        Fn.apply(t)\n        other(t, 4)\n")
    # what every call passes: wrap's BLOCK and nw are each left out by one call
    assert importer.passed_arguments(perf, "op", source) == {"wrap": {"x", "y"}, "Fn.forward": {"x"}}
    # a *args or **kwargs may hold any argument: only what is written before it counts
    starred = perf.replace("Fn.apply(t)", "Fn.apply(t, *t)")
    assert importer.passed_arguments(starred, "op", source)["Fn.forward"] == {"x"}
    keywords = perf.replace("wrap(t, t, 128)", "wrap(t, t, 128, nw=2, **t)")
    assert importer.passed_arguments(keywords, "op", source)["wrap"] == {"x", "y", "nw"}
    # the module's own calls count too: caller() leaves BLOCK and nw to their defaults
    both = perf.replace("wrap(t, t, 128)", "wrap(t, t, 128, 4)").replace("wrap(t, t, nw=8)", "wrap(t, t, 32, nw=8)")
    assert importer.passed_arguments(both, "op", source)["wrap"] == {"x", "y", "BLOCK", "nw"}
    inner = source + "\ndef caller(t):\n    return wrap(t, t)\n"
    assert importer.passed_arguments(both, "op", inner)["wrap"] == {"x", "y"}
    # `import ... as`, a module-level alias of an apply, a forward without ctx
    aliased = ("from TritonBench_v1.op import wrap as w, fn\n\nclass P:\n    def call_op(self, t):\n"
               "        w(t, t, 128)\n        fn(t, 16)\n")
    source_alias = source.replace("def forward(ctx, x, block=32)", "def forward(x, block=32)") + "fn = Fn.apply\n"
    assert importer.passed_arguments(aliased, "op", source_alias) == {
        "wrap": {"x", "y", "BLOCK"}, "Fn.forward": {"x", "block"}}


def test_the_problem_has_only_knobs_its_harness_can_reach():
    """operator_parameters: not a backward the harness never runs, not a default it passes."""
    source = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\n"
              "def k(x, B: tl.constexpr):\n    pass\n\n"
              "def fwd(x, BLOCK=64, STAGES=2):\n    k[(1,)](x, B=BLOCK, num_stages=STAGES)\n\n"
              "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x, block=64):\n"
              "        fwd(x, block)\n        return x\n\n    @staticmethod\n    def backward(ctx, g):\n"
              "        k[(1,)](g, B=128, num_warps=8)\n        return g\n")
    perf = "from TritonBench_v1.op import Fn\n\nclass P:\n    def call_op(self, t):\n        return Fn.apply(t)\n"
    params = importer.operator_parameters(source, perf, "op")
    # forward passes fwd's BLOCK always (its default never holds); forward's own `block` reaches no launch
    assert [(p["name"], p["knob"]) for p in params] == [
        ("STAGES", {"literal": "fwd:9"}), ("num_warps", {"launch": "fwd:10"})]
    assert importer.passed_arguments(perf, "op", source) == {"Fn.forward": {"x"}, "fwd": {"x", "BLOCK"}}


def test_importer_workers_go_to_both_arms_and_are_bounded(data, tmp_path):
    out = tmp_path / "campaign"
    assert importer.main([str(data), "--out", str(out), "--workers", "6"]) == 0
    for name in ("kforge.json", "random.json"):  # the baseline searches with the same evaluator
        e = json.loads((out / "toy" / name).read_text())
        assert e["evaluator"]["params"]["workers_per_device"] == 6
        assert e["evaluator"]["params"]["compile_timeout_s"] == 10.0  # a third of the default 30 s
    assert importer.main([str(data), "--out", str(out), "--workers", "0"]) == 2


def test_harness_never_runs_the_test_block_and_binds_a_variant(data):
    h = harness.operator(str(data), "toy")
    assert [len(s[0][0]) for s in h.shapes("spread:3")] == [16, 64, 256]
    # A search worker keeps only the sizes it uses; a later selection makes the inputs again.
    assert [len(s[0][0]) for s in h.shapes("0,-1", release_others=True)] == [16, 256]
    assert [x is None for x in h.inputs] == [False, True, True, True, False]
    assert h.perf.input_tensors[1] is None
    assert [len(s[0][0]) for s in h.shapes("all")] == [16, 32, 64, 128, 256]
    # A harness whose get_input_tensors only appends (layer_norm_welfold's) makes the sweep anew too.
    appending = h.perf.get_input_tensors
    h.perf.get_input_tensors = lambda: h.perf.input_tensors.extend(
        [(np.zeros(2 ** i, dtype=np.float32),) * 2 for i in range(4, 9)])
    h.shapes("0", release_others=True)
    assert [len(s[0][0]) for s in h.shapes("all")] == [16, 32, 64, 128, 256]
    h.perf.get_input_tensors = appending
    assert set(h.imported) == {"toy_add"}
    variant = types.SimpleNamespace(toy_add=lambda x, y: "variant")
    call = h.bind(variant)
    assert call(h.shapes("0")[0][0]) == "variant"
    # The harness's own name is restored after the call.
    assert vars(h.perf_module)["toy_add"] is h.original.toy_add
    with pytest.raises(AttributeError, match="toy_add"):
        h.bind(types.SimpleNamespace())


def test_search_workers_make_the_harness_sweep_one_at_a_time(data, tmp_path, monkeypatch):
    """fast_rope_embedding's sweep is 34 GB (on the GPU): four workers making it at once ran out of memory.
    search_shapes makes it under a lock of the machine, and keeps the search's sizes."""
    import threading
    import time
    monkeypatch.setenv("KFORGE_INPUTS_LOCK", str(tmp_path / "inputs.lock"))
    inside, most = [0], [0]
    count = threading.Lock()

    def hold():
        with harness.inputs_lock():
            with count:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with count:
                inside[0] -= 1

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1  # each flock opens the file anew: threads exclude each other as processes do
    shapes = harness.search_shapes(str(data), "toy", "0,-1")
    assert [len(s[0][0]) for s in shapes] == [16, 256]
    assert [x is None for x in harness.operator(str(data), "toy").inputs] == [False, True, True, True, False]
    assert "search_shapes(DATA, OP, " in importer.harness_text(str(data), "toy")


def test_a_variant_through_the_worker_with_the_generated_inputs_and_adapter(data, tmp_path):
    out = tmp_path / "campaign"
    importer.main([str(data), "--out", str(out)])
    e = json.loads((out / "toy" / "kforge.json").read_text())
    worker = program_worker.Worker(program_devices.make_device("fake", 0), str(tmp_path / "cache"))
    p = e["problem"]
    harness_file = str(out / "toy" / "harness.py")

    def evaluate(config, function="shapes"):
        return worker.evaluate({"op": "evaluate", "id": 1, "program": p["program"], "call": p["call"],
                                "end_marker": p["end_marker"], "inputs": {"file": harness_file, "function": function},
                                "adapter": {"file": harness_file, "function": "bind"},
                                "knobs": measure.knobs_for(p["parameters"], config), "time_shapes": [-1],
                                "timing": {"min_repeats": 3, "max_repeats": 5, "max_seconds": 0.2}})

    good = evaluate({"BLOCK_SIZE": 256, "num_warps": 8, "num_stages": 2})
    assert good["status"] == "ok", good["error"]
    bad = evaluate({"BLOCK_SIZE": 2, "num_warps": 4, "num_stages": 3}, "all_shapes")
    assert bad["status"] == "wrong_result" and "shape 0" in bad["error"]


def test_knobs_for_matches_the_problem_parameters():
    params = [{"name": "B", "values": [1], "knob": {"literal": "w:3"}},
              {"name": "BM", "values": [1], "knob": {"autotune": "k", "target": "BLOCK_M"}}]
    assert measure.knobs_for(params, {"B": 8, "BM": 64}) == [
        {"kind": "literal", "target": "B", "value": 8, "site": "w:3"},
        {"kind": "autotune", "target": "BLOCK_M", "value": 64, "kernel": "k"}]


def test_peaks_follow_the_card_name():
    assert measure.peaks_for("NVIDIA H200") == (4224.0, 989.0)
    assert measure.peaks_for("NVIDIA H100 80GB HBM3") == (3000.0, 989.0)
    assert measure.peaks_for("NVIDIA A100-SXM4-80GB") is None
    assert measure.ceilings("NVIDIA H100 80GB HBM3", None, 500.0) == (3000.0, 500.0)
    assert measure.ceilings("NVIDIA A100-SXM4-80GB", 2000.0, 312.0) == (2000.0, 312.0)
    with pytest.raises(SystemExit, match="no ceilings known for 'NVIDIA A100-SXM4-80GB'"):
        measure.ceilings("NVIDIA A100-SXM4-80GB", 2000.0, None)


def test_runnable_classification():
    assert runnable.classify("operator", ModuleNotFoundError("No module named 'triton.ops'")) == "import_error"
    assert runnable.classify("call", AttributeError("module 'triton.language' has no attribute 'libdevice'")) == "triton_api"
    assert runnable.classify("harness", ValueError("bad size")) == "harness_error"
    assert runnable.classify("call", RuntimeError("CUDA error: an illegal memory access")) == "runtime_error"
    Compilation = type("CompilationError", (Exception,), {})
    assert runnable.classify("call", Compilation("at 12:4")) == "compile_error"


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return path


def test_the_final_measurement_profiles_each_program_or_says_why():
    from kforge.triton.cupti_metrics import ProfilerUnavailable
    from kforge.triton.program_devices import FakeDevice, fake_kernel
    from kforge.tritonbench_g import measure

    def two_kernels(x):
        fake_kernel("a", 0.1)
        fake_kernel("b", 0.2)

    calls = {"original": two_kernels, "kforge": lambda x: (_ for _ in ()).throw(ValueError("bad size"))}
    out = measure.profile_calls(calls, ["original", "kforge"], None, FakeDevice())
    assert out["metrics"] == measure.CUPTI_METRICS
    assert out["original"] == {m: 2.0 for m in measure.CUPTI_METRICS}  # the fake: kernels launched
    assert out["kforge"]["error"].startswith("ValueError: bad size")

    class NoProfiler(FakeDevice):
        def kernel_metrics(self, *a, **k):
            raise ProfilerUnavailable("libkforge_cupti.so not found")

    assert measure.profile_calls(calls, ["original", "kforge"], None, NoProfiler()) == \
        {"error": "libkforge_cupti.so not found"}


def test_the_final_measurement_survives_a_sticky_gpu_fault(monkeypatch):
    """An illegal memory access (chunk_gla_fwd's original, 2026-12-07) breaks every later call in the
    process: the sizes after it are None for every program, with the reason, instead of no final.json."""
    state = {"broken": False}

    def healthy():  # the device's own check (TorchDevice.healthy)
        return not state["broken"]

    def synchronize():
        if state["broken"]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def do_bench(fn, warmup, rep, return_mode):
        fn()
        synchronize()
        return 1.0

    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=synchronize))
    fake_triton = types.ModuleType("triton")
    fake_triton.testing = types.ModuleType("triton.testing")
    fake_triton.testing.do_bench = do_bench
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setitem(sys.modules, "triton", fake_triton)
    monkeypatch.setitem(sys.modules, "triton.testing", fake_triton.testing)

    def faults_on_size_1(x):
        if x == 1:
            state["broken"] = True
            raise RuntimeError("an illegal memory access was encountered")

    calls = {"original": faults_on_size_1, "kforge": lambda x: None}
    times, errors, fault = measure.time_interleaved(calls, [0, 1, 2], 2, 0.0, 0.0, healthy)
    assert times == {"original": [1.0, None, None], "kforge": [1.0, None, None]}
    assert errors["original"][0].startswith("size 1: RuntimeError")
    assert errors["kforge"] == ["sizes 1-2: not measured: the GPU faulted in original (size 1) "
                                "(a sticky error: nothing after it runs in this process)"]
    assert fault == {"program": "original", "where": "size 1",
                     "error": "RuntimeError: an illegal memory access was encountered"}
    state["broken"] = False
    seconds, fault = measure.compile_outside_the_lock(calls, [0, 1, 2], healthy)
    assert fault["program"] == "original" and fault["where"] == "size 1" and set(seconds) == set(calls)
    # An error that leaves the GPU usable is only that size's.
    state["broken"] = False

    def bad_size_1(x):
        if x == 1:
            raise ValueError("bad size")

    times, errors, fault = measure.time_interleaved({"original": lambda x: None, "kforge": bad_size_1}, [0, 1, 2],
                                                    2, 0.0, 0.0, healthy)
    assert times == {"original": [1.0, 1.0, 1.0], "kforge": [1.0, None, 1.0]} and fault is None
    assert errors["original"] == [] and len(errors["kforge"]) == 2  # both rounds
    assert measure.compile_outside_the_lock({"kforge": bad_size_1}, [0, 1, 2], healthy)[1] is None
    # A candidate's check runs the original first: a fault the worker reports as the original's is its.
    assert measure.check_fault("kforge", "launch_failed: the original program fails on shape 2: ...")["program"] == \
        "original"
    assert measure.check_fault("random", "launch_failed: an illegal memory access was encountered")["program"] == \
        "random"


def test_the_autotune_record_names_each_autotuned_kernels_choices():
    import types

    import triton
    import triton.language as tl
    from kforge.tritonbench_g import measure

    @triton.jit
    def plain(x, B: tl.constexpr):
        pass

    configs = [triton.Config({"B": 32}, num_warps=4), triton.Config({"B": 64}, num_warps=8)]
    tuned = triton.autotune(configs=configs, key=["n"])(triton.jit(plain.fn))
    module = types.SimpleNamespace(plain=plain, tuned=tuned, other=3)
    assert measure.autotune_record(types.SimpleNamespace(plain=plain), 1.0) is None  # nothing autotuned
    tuned.cache[(1024,)] = configs[1]  # what the autotuner keeps per key after benchmarking its list
    tuned.cache[(4096,)] = configs[1]
    record = measure.autotune_record(module, 2.34567)
    assert record == {"first_calls_s": 2.346, "first_calls_before_checks": True,
                      "kernels": {"tuned": {"configs": 2, "keys": 2, "chosen": [str(configs[1])]}}}


def test_final_json_counts_the_searches_start_configurations_and_says_if_the_first_is_the_original():
    assert [measure.start_count(e) for e in ({}, {"start": "default"}, {"start": ["default", {"B": 1}]})] == [0, 1, 2]
    launch = {"name": "num_warps", "values": [1, 4], "default": 4, "knob": {"launch": "w"}}
    assert program_worker.start_is_original([launch])
    assert not program_worker.start_is_original([{**launch, "knob": {"autotune": "k"}}])
    assert not program_worker.start_is_original([{k: v for k, v in launch.items() if k != "default"}])


def test_the_final_measurement_holds_one_size_on_the_gpu_at_a_time(monkeypatch):
    """fast_rope_embedding's sweep is 34 GB on the GPU, fast_ce_loss's about 60: the timing and the first
    calls move each size to the GPU when they reach it (to_cuda, as the harness's run_benchmark does) and
    drop it after, instead of holding the whole sweep beside the checks' references."""
    live = {"now": 0, "most": 0}

    class OnGpu:  # a size's inputs on the GPU: counted while alive
        def __init__(self, i):
            self.i = i
            live["now"] += 1
            live["most"] = max(live["most"], live["now"])

        def __del__(self):
            live["now"] -= 1

    class Harness:  # kforge.tritonbench_g.harness.Operator's part the measurement uses
        inputs = ["host 0", "host 1", "host 2", "host 3"]

        def shapes(self, selection):
            return [(OnGpu(int(i)),) for i in selection.split(",")]

    def do_bench(fn, warmup, rep, return_mode):
        fn()
        return 1.0

    fake_triton = types.ModuleType("triton")
    fake_triton.testing = types.ModuleType("triton.testing")
    fake_triton.testing.do_bench = do_bench
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None)))
    monkeypatch.setitem(sys.modules, "triton", fake_triton)
    monkeypatch.setitem(sys.modules, "triton.testing", fake_triton.testing)
    inputs = measure.SizeInputs(Harness())
    assert len(inputs) == 4 and inputs[-1].i == 3 and inputs.host(2) == "host 2"
    seen = []
    calls = {"original": lambda x: seen.append(x.i), "kforge": lambda x: None}
    seconds, fault = measure.compile_outside_the_lock(calls, inputs, lambda: True)
    assert fault is None and seen == [0, 1, 2, 3] and live["most"] == 1
    times, errors, fault = measure.time_interleaved(calls, inputs, 2, 0.0, 0.0, lambda: True)
    assert times == {"original": [1.0] * 4, "kforge": [1.0] * 4} and fault is None
    assert live["most"] == 1 and live["now"] == 0


def test_the_final_measurement_end_to_end_on_the_toy_operator(data, tmp_path, monkeypatch):
    """measure() on the fake device: kforge's winner checked correct on every size and timed; random's
    (BLOCK_SIZE 2, the planted fault) wrong at its first size; the checks' inputs released before the
    timing; final.json's sizes, times and rates."""
    out = tmp_path / "campaign"
    importer.main([str(data), "--out", str(out)])
    runs = tmp_path / "runs" / "toy"
    runs.mkdir(parents=True)

    def trials(config, ms):
        return json.dumps({"sequence": 0, "status": "ok", "time_ms": ms, "configuration": config, "clock_s": 1.0}) + "\n"

    (runs / "kforge.jsonl").write_text(trials({"BLOCK_SIZE": 256, "num_warps": 8, "num_stages": 2}, 1.0))
    (runs / "random.jsonl").write_text(trials({"BLOCK_SIZE": 2, "num_warps": 4, "num_stages": 3}, 0.5))
    fake_triton = types.ModuleType("triton")
    fake_triton.testing = types.ModuleType("triton.testing")
    fake_triton.testing.do_bench = lambda fn, warmup, rep, return_mode: (fn(), 2.0)[1]
    fake_triton.runtime = types.ModuleType("triton.runtime")
    fake_triton.runtime.autotuner = types.ModuleType("triton.runtime.autotuner")
    fake_triton.runtime.autotuner.Autotuner = type("Autotuner", (), {})
    for name, module in (("triton", fake_triton), ("triton.testing", fake_triton.testing),
                         ("triton.runtime", fake_triton.runtime),
                         ("triton.runtime.autotuner", fake_triton.runtime.autotuner)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None)))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    released = []
    real_release = program_worker.Worker.release_inputs
    monkeypatch.setattr(program_worker.Worker, "release_inputs",
                        lambda self: (released.append(len(self.shapes)), real_release(self)))
    order = []
    real_first, real_check = measure.compile_outside_the_lock, measure.check
    monkeypatch.setattr(measure, "compile_outside_the_lock",
                        lambda calls, *a: (order.append("first calls: " + ",".join(calls)), real_first(calls, *a))[1])
    monkeypatch.setattr(measure, "check", lambda e, hf, knobs, w: (order.append("check"), real_check(e, hf, knobs, w))[1])
    r = measure.measure(str(out / "toy"), str(runs), 2, 0.0, 0.0, 1000.0, 100.0, device="fake")
    assert r["sizes"] == ["0", "1", "2", "3", "4"] and released == [5]  # all five checked, then released
    # The original's first calls (an autotuner's tuning) come before the checks run it.
    assert order == ["first calls: original", "check", "check", "first calls: kforge,random"]
    assert r["original"]["ms"] == [2.0] * 5 and r["original"]["errors"] == []
    assert r["original"]["gbps"][0] == pytest.approx(3 * 16 * 4 / 2e-3 / 1e9)  # the harness's formula, host input
    k, rnd = r["candidates"]["kforge"], r["candidates"]["random"]
    assert k["correct"] and k["ms"] == [2.0] * 5 and k["errors"] == []
    assert not rnd["correct"] and "shape 0" in rnd["errors"][0]
    assert "gpu_fault" not in r and r["protocol"]["rounds"] == 2
    # Every step's seconds, in the order they ran.
    assert list(r["phases_s"]) == ["setup", "original_first_calls", "checks", "winners_first_calls", "lock_wait",
                                 "timing", "cupti"]
    assert all(v >= 0 for v in r["phases_s"].values())
    assert r["search_timer"] == {"flush_bytes": 256 << 20}  # the program worker's flush (the searches' timer)


def test_the_phase_clock_gives_each_step_the_time_since_the_previous():
    ticks = iter([10.0, 12.5, 13.0, 20.0])
    phases = measure.PhaseClock(clock=lambda: next(ticks))
    for step in ("setup", "checks", "setup"):
        phases.done(step)
    assert phases.seconds == {"setup": 9.5, "checks": 0.5}  # 2.5 + 7.0: a step named twice adds up


def test_the_flush_benchmark_table_gives_each_timer_against_do_bench():
    from kforge.tritonbench_g import flush_bench
    row = {"op": "l2_norm_triton1", "busy": 4, "do_bench": 0.008, "twice_l2": 0.064, "now": 0.010}
    lines = flush_bench.header(50 << 20) + [flush_bench.row_line(row)]
    assert lines[0] == ("| operator | busy cores | do_bench ms | worker, flush 100 MiB (ratio) | "
                        "worker, flush 256 MiB (ratio) |")
    assert lines[2] == "| l2_norm_triton1 | 4 | 0.0080 | 0.0640 (8.00) | 0.0100 (1.25) |"


def test_the_flush_benchmarks_spinners_stop_and_a_zero_time_has_no_ratio():
    from kforge.tritonbench_g import flush_bench
    with flush_bench.BusyCores(2) as busy:
        assert all(p.is_alive() for p in busy.procs)
    assert not any(p.is_alive() for p in busy.procs)
    assert flush_bench.row_line({"op": "x", "busy": 0, "do_bench": 0.0, "twice_l2": 0.064, "now": 0.01}) == \
        "| x | 0 | 0.0000 | 0.0640 (-) | 0.0100 (-) |"


def test_the_search_order_puts_the_set_aside_last_and_leaves_out_the_measured(tmp_path):
    from kforge.tritonbench_g import order
    runnable, index, aside, runs = (tmp_path / n for n in ("runnable.jsonl", "index.json", "set-aside.jsonl", "runs"))
    runnable.write_text("".join(json.dumps({"op": op, "runnable": ok}) + "\n" for op, ok in
                                (("a", True), ("b", True), ("c", False), ("d", True), ("e", True), ("f", True))))
    index.write_text(json.dumps([{"op": op, "status": "no_knob" if op == "e" else "ready"} for op in "abcdef"]))
    aside.write_text(json.dumps({"op": "a", "reason": "out_of_memory"}) + "\n")
    (runs / "d").mkdir(parents=True)
    (runs / "d" / "final.json").write_text("{}")
    # c is not runnable, e has no knob; a was set aside: after the others
    assert order.search_order(str(runnable), str(index), str(aside)) == ["b", "d", "f", "a"]
    assert order.search_order(str(runnable), str(index), str(aside), str(runs)) == ["b", "f", "a"]  # d measured
    assert order.search_order(str(runnable), str(index), str(tmp_path / "none")) == ["a", "b", "d", "f"]
    # d marked to be searched again: after those without a verdict, before the set aside
    redo = tmp_path / "redo.jsonl"
    redo.write_text(json.dumps({"op": "d", "reason": "a fault fixed", "date": "2026-12-08"}) + "\n")
    assert order.search_order(str(runnable), str(index), str(aside), str(runs), str(redo)) == ["b", "f", "d", "a"]
    assert order.search_order(str(runnable), str(index), str(aside), str(runs), str(tmp_path / "none")) == \
        ["b", "f", "a"]
    # several marked: in the file's order
    (runs / "b").mkdir()
    (runs / "b" / "final.json").write_text("{}")
    redo.write_text("".join(json.dumps({"op": op, "reason": "r"}) + "\n" for op in ("d", "b")))
    assert order.search_order(str(runnable), str(index), str(aside), str(runs), str(redo)) == ["f", "d", "b", "a"]


@pytest.mark.parametrize("line, words", [
    ('{"op": "a", "reason": "r", "when": "today"}', "unknown key 'when'"),
    ('{"op": "a"}', "'reason' (why: the fault fixed since its search) must be a non-empty string"),
    ('{"op": "", "reason": "r"}', "'op' (the operator to search again) must be a non-empty string"),
    ('{"op": "a", "reason": "r", "date": 20261208}', "'date' must be a string"),
    ('["a"]', "expected a JSON object, got list"),
    ('{"op": "a", "reason": "r"', "malformed JSON line"),
    ('{"op": "b", "reason": "r"}', "'b' is listed twice")])
def test_a_malformed_redo_list_is_an_error_naming_its_line(tmp_path, capsys, line, words):
    from kforge.tritonbench_g import order
    redo = tmp_path / "redo.jsonl"
    redo.write_text('{"op": "b", "reason": "r", "date": "2026-12-08"}\n' + line + "\n")
    with pytest.raises(order.RedoError, match=f"redo.jsonl:2: .*{words}" if "(" not in words else "redo.jsonl:2: "):
        order.read_redo(str(redo))
    runnable, index = tmp_path / "runnable.jsonl", tmp_path / "index.json"
    runnable.write_text(json.dumps({"op": "b", "runnable": True}) + "\n")
    index.write_text(json.dumps([{"op": "b", "status": "ready"}]))
    assert order.main([str(runnable), str(index), "--redo", str(redo)]) == 2
    assert words in capsys.readouterr().err
    assert order.read_redo(str(tmp_path / "absent.jsonl")) == []


def test_next_says_how_many_of_each_group_are_left(tmp_path, capsys):
    from kforge.tritonbench_g import order
    runnable, index, aside, redo = (tmp_path / n for n in ("runnable.jsonl", "index.json", "set-aside.jsonl",
                                                            "redo.jsonl"))
    runnable.write_text("".join(json.dumps({"op": op, "runnable": True}) + "\n" for op in "abcd"))
    index.write_text(json.dumps([{"op": op, "status": "ready"} for op in "abcd"]))
    aside.write_text(json.dumps({"op": "a"}) + "\n")
    redo.write_text(json.dumps({"op": "c", "reason": "r"}) + "\n")
    assert order.main([str(runnable), str(index), "--set-aside", str(aside), "--redo", str(redo), "--first", "2"]) == 0
    assert capsys.readouterr().out.strip() == \
        "4 operators to search (2 without a verdict, 1 to search again, 1 set aside); the next 2: b d"


class _SweepDevice:
    """Tensors are dicts {"on": "gpu" | "host"}; the inputs context is where unplaced ones are made."""

    def __init__(self, oom=False):
        self.oom, self.where, self.seeds, self.releases = oom, "host", [], 0

    def is_tensor(self, x):
        return isinstance(x, dict) and "on" in x

    def to_host(self, x):
        return {"on": "host"}

    def on_device(self, x):
        return x["on"] == "gpu"

    def seed(self, seed):
        self.seeds.append(seed)

    def release_cached_memory(self):
        self.releases += 1

    def inputs_context(self):
        device = self

        class Context:
            def __enter__(self):
                device.where = "gpu"

            def __exit__(self, *exc):
                device.where = "host"

        return Context()


def _sweep_harness(device, passes_through=False):
    made = []

    def make():
        if device.oom and device.where == "gpu":
            raise MemoryError("CUDA out of memory")
        inputs = [({"on": device.where}, 3), ({"on": device.where}, 4)]
        perf = types.SimpleNamespace(input_tensors=list(inputs),
                                     to_cuda=(lambda x: x) if passes_through else
                                     (lambda x: tuple({"on": "gpu"} if isinstance(v, dict) else v for v in x)))
        made.append(device.where)
        return types.SimpleNamespace(inputs=inputs, perf=perf)

    return make, made


def test_the_final_measurement_makes_its_sweep_on_the_gpu_and_keeps_it_on_the_host():
    """Made in the inputs context (the GPU: seconds, where torch's CPU generator took 17-32 s), then
    copied to the host for SizeInputs; seeded; non-tensor values kept."""
    device = _SweepDevice()
    make, made = _sweep_harness(device)
    forgotten = []
    h = measure.harness_with_host_sweep(make, lambda: forgotten.append(1), device, 7)
    assert made == ["gpu"] and not forgotten and device.seeds == [7]
    assert h.inputs == [({"on": "host"}, 3), ({"on": "host"}, 4)] and h.perf.input_tensors == h.inputs


def test_the_final_measurement_makes_its_sweep_on_the_host_where_the_gpu_cannot():
    """Out of GPU memory while making it (fast_ce_loss's sweep is about 60 GB), or a harness whose
    to_cuda passes a host input through (its own tensors are made on the GPU): made again as
    TritonBench's harness makes it, the first harness forgotten, seeded again."""
    for device, through in ((_SweepDevice(oom=True), False), (_SweepDevice(), True)):
        make, made = _sweep_harness(device, passes_through=through)
        forgotten = []
        h = measure.harness_with_host_sweep(make, lambda: forgotten.append(1), device, 3)
        assert made == (["host"] if device.oom else ["gpu", "host"]) and forgotten == [1]
        assert device.seeds == [3, 3] and h.inputs[0][0] == {"on": "host"}
    # A harness that fails on the GPU for another reason (it needs host tensors) is made on the host; one
    # that fails there too is the harness's error, which propagates.
    device = _SweepDevice()
    made = []

    def needs_host():
        made.append(device.where)
        if device.where == "gpu":
            raise TypeError("can't convert cuda:0 device type tensor to numpy")
        return types.SimpleNamespace(inputs=[({"on": "host"},)], perf=types.SimpleNamespace(input_tensors=[]))

    assert measure.harness_with_host_sweep(needs_host, lambda: None, device, 0).inputs == [({"on": "host"},)]
    assert made == ["gpu", "host"]
    with pytest.raises(ValueError):
        measure.harness_with_host_sweep(lambda: (_ for _ in ()).throw(ValueError("bad")), lambda: None, device, 0)


def test_the_host_copy_of_a_sweep_keeps_named_tuples_and_shares_a_shared_tensor():
    import collections
    device = _SweepDevice()
    made = []
    device.to_host = lambda x: (made.append(x), {"on": "host"})[1]
    Pair = collections.namedtuple("Pair", "a b")
    shared = {"on": "gpu"}
    copies: dict = {}
    out = [measure.host_value(v, device, copies) for v in (Pair(shared, 1), [shared, {"w": {"on": "gpu"}}])]
    assert isinstance(out[0], Pair) and out[0].a == {"on": "host"} and out[0].b == 1
    assert out[0].a is out[1][0] and len(made) == 2  # the shared tensor copied once
