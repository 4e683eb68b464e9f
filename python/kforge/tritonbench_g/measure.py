"""The final measurement of a TritonBench-G operator (issue 12, items 3 and 4): the original and each
search's winner on EVERY size of the harness's sweep, checked, then timed interleaved.

    python -m kforge.tritonbench_g.measure CAMPAIGN/OP --runs RUNS/OP [--rounds 2] [--warmup-ms 25] [--rep-ms 100]

``CAMPAIGN/OP`` is the importer's folder (``kforge.json``: the parameters and their knobs; ``harness.py``);
``RUNS/OP`` holds the searches' trials as ``kforge export --format jsonl`` wrote them (``kforge.jsonl``,
``random.jsonl``) and receives ``final.json`` (layout: kforge.tritonbench_g.report).

1. Correctness: each winner through the program worker's check (kforge.triton.program_worker.Worker) on
   every size: fresh seeded inputs, write-only arguments and result blocks poisoned, every returned tensor
   and every written argument compared with the original's, tolerances per dtype. A winner wrong on any
   size is ``"correct": false`` with the worker's message, whatever its speed.
2. Time, TritonBench's way: ``triton.testing.do_bench`` (median, the L2 flushed before each call, warm-up)
   of the harness's ``call_op`` on ``to_cuda(input)``, per size, in ``--rounds`` rounds; within a round the
   programs take turns in an order that alternates between rounds, so clock drift cannot favour either.
   Each program's time per size is the median of its rounds. As the harness's ``run_benchmark`` does, a
   size's inputs go to the GPU for that size only (``SizeInputs``), after the checks' inputs and
   references were dropped (``Worker.release_inputs``): the GPU holds one size of the sweep, not all.
   The sweep is made on the GPU and kept in host memory (``harness_with_host_sweep``).
   The protocol is recorded in final.json (it is shorter than the harness's 100 ms warm-up and 1000 ms
   of repetitions: say so when quoting). The
   timing holds the GPU's lock exclusively (the program worker's DeviceLock), so searches of other
   operators sharing the GPU (``--ops-at-once``) compile meanwhile but never run a kernel beside it.
3. The original's GB/s and TFLOP/s per size from the harness's ``get_gbps`` / ``get_tflops``, and the
   peaks they are judged against (``--peak-gbps``: the copy bandwidth measured on the card;
   ``--peak-tflops``: the nominal dense fp16/bf16 tensor-core peak; both default to the card's, PEAKS).
   final.json names the card (``gpu``).
4. CUPTI metrics (``cupti``) of the original and of each correct winner on the largest size: DRAM and
   SM throughput against their peaks, achieved occupancy, bytes moved, the kernels' time (kforge's range
   profiler, kforge.triton.cupti_metrics; one range per kernel, values combined over the call's
   kernels). Under the same exclusive lock; a profiler that cannot run leaves ``cupti.error``.
5. Triton's autotuner (item 6): an original with ``@triton.autotune`` kernels is that autotuner over the
   operator's own list; ``autotune`` records per kernel the configurations it chose over the sizes and
   the seconds of the original's first calls on every size (its tuning cost, with the compiles of its
   list: the search script gives each operator's measurement a Triton cache of its own, so they are
   all in it).
"""

from __future__ import annotations

import argparse
import collections.abc
import json
import math
import os
import statistics
import sys
import time
from typing import Callable

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kforge.triton import program_worker  # noqa: E402
from kforge.tritonbench_g.report import ORIGINAL_FAILED  # noqa: E402

# The ceilings the original's rates are judged against, per card (the name torch.cuda.get_device_name
# gives, matched by its start): (device-to-device copy GB/s as measured, dense fp16/bf16 tensor-core TFLOP/s
# from the vendor's datasheet; the H100 SXM and H200 share the arithmetic rate).
PEAKS = {
    "NVIDIA H200": (4224.0, 989.0),  # copy: docs/gpu-engine.md, 2026-12-03
    "NVIDIA H100": (3000.0, 989.0),  # copy: about 3.0 TB/s on an H100 80GB HBM3 here, 2026-11-13
}


def peaks_for(gpu: str) -> tuple[float, float] | None:
    """The (GB/s, TFLOP/s) ceilings of the card named ``gpu``, or None where PEAKS does not know it."""
    for prefix, peaks in PEAKS.items():
        if gpu.startswith(prefix):
            return peaks
    return None


def ceilings(gpu: str, peak_gbps: float | None, peak_tflops: float | None) -> tuple[float, float]:
    """The peaks to judge by: each one given, else the card's (PEAKS); SystemExit for a card PEAKS does
    not know unless both are given."""
    if peak_gbps is not None and peak_tflops is not None:
        return peak_gbps, peak_tflops
    known = peaks_for(gpu)
    if known is None:
        raise SystemExit(f"measure: no ceilings known for {gpu!r}: pass --peak-gbps and --peak-tflops")
    return (known[0] if peak_gbps is None else peak_gbps), (known[1] if peak_tflops is None else peak_tflops)


def knobs_for(parameters: list[dict], configuration: dict) -> list[dict]:
    """The worker's knob list for a configuration (as src/config/program.cpp's program_knobs makes it)."""
    knobs = []
    for p in parameters:
        kind, where = next((k, v) for k, v in p["knob"].items() if k != "target")
        knob = {"kind": kind, "target": p["knob"].get("target", p["name"]), "value": configuration[p["name"]]}
        knob["kernel" if kind in ("autotune", "heuristic") else "site"] = where
        knobs.append(knob)
    return knobs


def best_trial(path: str) -> dict | None:
    """The fastest ok trial of an exported run (None: no file or no ok trial)."""
    if not os.path.exists(path):
        return None
    best = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") == "ok" and (best is None or r["time_ms"] < best["time_ms"]):
                best = r
    return best


def start_count(experiment: dict) -> int:
    """How many configurations each search evaluated first (the experiment's ``start:``; ``default`` is
    one, the original's own): its trials of sequence below this are those."""
    start = experiment.get("start")
    return 0 if start is None else 1 if isinstance(start, str) else len(start)


def search_seconds(path: str) -> tuple[float | None, float | None, int]:
    """(the search's wall seconds, the last trial's clock_s, the trial count) of an exported run. The wall
    time is the whole ``kforge run`` (workers' start and the originals' reference runs included), from
    ``<name>.wall_s`` beside the export when scripts/device-tritonbench-g wrote it, else None."""
    if not os.path.exists(path):
        return None, None, 0
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    wall_file = path[:-len(".jsonl")] + ".wall_s"
    wall = float(open(wall_file, encoding="utf-8").read()) if os.path.exists(wall_file) else None
    return wall, max((r.get("clock_s", 0.0) for r in rows), default=None), len(rows)


def check(experiment: dict, harness: str, knobs: list[dict], worker) -> tuple[bool, list[str]]:
    """Every size of the sweep through the program worker's check."""
    p = experiment["problem"]
    req = {"op": "evaluate", "id": 0, "program": p["program"], "call": p["call"],
           "end_marker": p.get("end_marker"), "inputs": {"file": harness, "function": "all_shapes"},
           "adapter": {"file": harness, "function": "bind"}, "knobs": knobs, "time_shapes": [-1],
           "seed": experiment.get("seed", 0), "profile": False,
           "timing": {"warmup": 1, "min_repeats": 3, "max_repeats": 3, "max_seconds": 0.2}}
    answer = worker.evaluate(req)
    return answer["status"] == "ok", ([] if answer["status"] == "ok" else [f"{answer['status']}: {answer['error']}"])


def variant_module(experiment: dict, knobs: list[dict], worker):
    p = experiment["problem"]
    return worker.import_variant({"program": p["program"], "end_marker": p.get("end_marker")}, knobs)


def time_interleaved(calls: dict, inputs: list, rounds: int, warmup_ms: float, rep_ms: float,
                     healthy: Callable[[], bool]) -> tuple[dict, dict, dict | None]:
    """({name: [median ms per size]}, {name: [errors]}, fault): do_bench of ``call(input)`` per size, the
    programs in an order that alternates between rounds. A size a program fails on is None, with the
    error; where the failure left the GPU unusable (``healthy()``, the device's check, is false after it:
    an illegal memory access is sticky), the sizes after it too (abandoned), and fault says where
    (gpu_fault; None where none did)."""
    import triton.testing
    names = list(calls)
    out = {n: [] for n in names}
    errors = {n: [] for n in names}
    for i in range(len(inputs)):
        x = inputs[i]  # (a SizeInputs moves this size to the GPU here; dropped at the end of the size)
        samples = {n: [] for n in names}
        for r in range(rounds):
            for n in (names if r % 2 == 0 else names[::-1]):
                try:
                    samples[n].append(triton.testing.do_bench(lambda: calls[n](x), warmup=warmup_ms, rep=rep_ms,
                                                              return_mode="median"))
                except Exception as e:  # e.g. a size no search size covered
                    samples[n].append(math.nan)
                    errors[n].append(f"size {i}: {type(e).__name__}: {str(e)[:300]}")
                    if not healthy():
                        fault = gpu_fault(n, f"size {i}", e)
                        return (*abandoned(out, errors, len(inputs), fault), fault)
        for n in names:
            good = [s for s in samples[n] if not math.isnan(s)]
            out[n].append(statistics.median(good) if len(good) == len(samples[n]) else None)
        del x
    return out, errors, None


def gpu_fault(program: str, where: str, error) -> dict:
    """final.json's ``gpu_fault``: the program whose call left the GPU unusable ("original", "kforge",
    "random"), where ("size i", "check") and the error."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return {"program": program, "where": where, "error": text[:300]}


def check_fault(name: str, error: str) -> dict:
    """The gpu_fault of a candidate's check that left the GPU unusable: the check's setup runs the
    original first (its reference), so a failure the worker reports as the original's is the original's."""
    by_original = error.split(": ", 1)[-1].startswith(ORIGINAL_FAILED)
    return gpu_fault("original" if by_original else name, "check", error)


def fault_text(fault: dict) -> str:
    return f"{fault['program']} ({fault['where']})"


def abandoned(out: dict, errors: dict, sizes: int, fault: dict) -> tuple[dict, dict]:
    """time_interleaved's result once the GPU faulted: sizes not measured are None for every program, with
    the reason, so that final.json still records the operator (its original failed, or a candidate did)."""
    for n in out:
        measured = len(out[n])
        out[n] += [None] * (sizes - measured)
        errors[n].append(f"sizes {measured}-{sizes - 1}: not measured: the GPU faulted in {fault_text(fault)} "
                         "(a sticky error: nothing after it runs in this process)")
    return out, errors


def compile_outside_the_lock(calls: dict, inputs: list,
                             healthy: Callable[[], bool]) -> tuple[dict[str, float], dict | None]:
    """One call of every program on every size before the timing takes the GPU's lock, so Triton's JIT
    compiles (and an original's @triton.autotune benchmarks its list) while other processes on the GPU may
    still time. Returns each program's seconds over these first calls, and where the GPU faulted (a
    gpu_fault; None where it did not: the first calls stop there). Other errors are left to the timing
    to record."""
    import torch
    seconds = {name: 0.0 for name in calls}
    for i in range(len(inputs)):
        x = inputs[i]
        for name, call in calls.items():
            t0 = time.perf_counter()
            try:
                call(x)
                torch.cuda.synchronize()
            except Exception as e:
                if not healthy():
                    return seconds, gpu_fault(name, f"size {i}", e)
            seconds[name] += time.perf_counter() - t0
        del x
    return seconds, None


def autotune_record(module, first_calls_s: float) -> dict | None:
    """final.json's ``autotune`` for an original whose module holds @triton.autotune kernels, after its
    first calls: per kernel the list's length, the tuning keys met and the configurations chosen, and
    the first calls' seconds (the autotuner's cost: compiling and benchmarking its list per key, in a
    Triton cache of the measurement's own; taken before the checks run the original:
    ``first_calls_before_checks``); None for a module without one."""
    from triton.runtime.autotuner import Autotuner
    kernels = {name: {"configs": len(obj.configs), "keys": len(obj.cache),
                      "chosen": sorted({str(c) for c in obj.cache.values()})}
               for name, obj in sorted(vars(module).items()) if isinstance(obj, Autotuner)}
    return {"first_calls_s": round(first_calls_s, 3), "first_calls_before_checks": True,
            "kernels": kernels} if kernels else None


# What the final measurement profiles (the report's at_bound reads the first two).
CUPTI_METRICS = ["dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                 "sm__warps_active.avg.pct_of_peak_sustained_active", "dram__bytes_read.sum",
                 "dram__bytes_write.sum", "gpu__time_duration.sum"]


def profile_calls(calls: dict, names: list[str], x, device) -> dict:
    """{"size": -1, "metrics": [...], program name: {metric: value}} for ``call(x)`` of each program, or
    {"error": why} where the profiler cannot run; a program that fails under it gets {"error": why}."""
    out: dict = {"metrics": CUPTI_METRICS}
    for name in names:
        try:
            out[name] = device.kernel_metrics(lambda: calls[name](x), lambda: None, CUPTI_METRICS, True)
        except Exception as e:  # noqa: BLE001 - recorded; the table does not depend on it
            from kforge.triton.cupti_metrics import ProfilerUnavailable
            if isinstance(e, ProfilerUnavailable) and name == names[0]:
                return {"error": f"{e}"}
            out[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return out


def host_value(value, device, copies: dict | None = None):
    """``value`` with every tensor in it (through tuples, named tuples, lists and dicts) in host memory; a
    tensor met twice (one shared by several sizes) gets one copy (``copies``: id -> copy, kept by the
    caller across the sweep's values)."""
    copies = {} if copies is None else copies
    if device.is_tensor(value):
        if id(value) not in copies:
            copies[id(value)] = (value, device.to_host(value))  # the original kept: its id stays unique
        return copies[id(value)][1]
    if isinstance(value, tuple):
        items = [host_value(v, device, copies) for v in value]
        return type(value)._make(items) if hasattr(value, "_make") else tuple(items)
    if isinstance(value, list):
        return [host_value(v, device, copies) for v in value]
    if isinstance(value, dict):
        return {k: host_value(v, device, copies) for k, v in value.items()}
    return value


def host_sweep_goes_to_gpu(harness, device) -> bool:
    """Moves ``harness``'s sweep to host memory; whether its ``to_cuda`` then brings the smallest size's
    every tensor to the GPU (as the timing needs). False also where either step fails."""
    try:
        copies: dict = {}
        harness.inputs = [host_value(x, device, copies) for x in harness.inputs]
        del copies  # the GPU's tensors
        harness.perf.input_tensors = list(harness.inputs)
        moved = program_worker.tensors_in(harness.perf.to_cuda(harness.inputs[0]), device, "input")
    except Exception:  # noqa: BLE001 - the caller makes the sweep as the harness does, where this shows
        return False
    return all(device.on_device(t) for _, t in moved)


def harness_with_host_sweep(make: Callable[[], object], forget: Callable[[], None], device, seed: int):
    """The operator's harness (``make()``: harness.operator, which makes the whole sweep) with its sweep
    in host memory, for SizeInputs to move one size at a time to the GPU. The sweep is made where the
    search workers make theirs, on the GPU (the device's inputs context), and copied to the host. Made on
    the host with torch's CPU generator, as until 2026-12-07, the measurement's setup step took 17.5 s for
    layer_norm_welfold's sweep (2 GB of bf16) and 32.1 s for lightning_attention's (6.4 GB of fp16) on an
    H100, against 4-7 s for small sweeps (final.json ``phases_s``). It is made on the host instead, as
    TritonBench's own harness makes it (``forget()`` drops the first harness), where making it on the GPU
    fails (out of memory: fast_ce_loss's sweep is about 60 GB; or a harness that needs host tensors), or
    where the harness's ``to_cuda`` leaves a host input on the host (a harness that makes its tensors on
    the GPU itself and passes them through). Either way seeded with ``seed``; an error of the harness on
    the host propagates."""
    device.seed(seed)
    try:
        with device.inputs_context():
            harness = make()
    except Exception:  # noqa: BLE001 - made again on the host below, where a harness's own error shows
        harness = None
    if harness is not None and host_sweep_goes_to_gpu(harness, device):
        device.release_cached_memory()  # the GPU's copies of the sweep
        return harness
    harness = None  # its GPU tensors go with it, before the allocator's cache is handed back
    forget()
    device.release_cached_memory()
    device.seed(seed)
    return make()


def rate(fn, inp, ms):
    try:
        return float(fn(inp, ms)) if ms else None
    except Exception:
        return None


class SizeInputs(collections.abc.Sequence):
    """The harness's sizes for the final measurement, each moved to the GPU when it is used
    (``to_cuda``, as TritonBench's own ``run_benchmark`` does per size) and dropped after it: the timing
    holds one size's inputs on the GPU at a time, not the whole sweep (fast_rope_embedding's is 34 GB,
    fast_ce_loss's about 60 GB, beside the checks' references). ``host(i)`` is the harness's own input
    (where its ``get_input_tensors`` made it), for its ``get_gbps``/``get_tflops``, which read shapes."""

    def __init__(self, harness):
        self.harness = harness

    def __len__(self) -> int:
        return len(self.harness.inputs)

    def __getitem__(self, i: int):
        i = range(len(self))[i]  # negative indices; IndexError past the end ends an iteration
        return self.harness.shapes(str(i))[0][0]  # each call is (to_cuda(input),)

    def host(self, i: int):
        return self.harness.inputs[i]


class PhaseClock:
    """Seconds of each named step of one measurement, in order (final.json's ``phases_s``): where the
    30-50 s a measurement takes beside its 5-25 s of timing go."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock, self.seconds, self._last = clock, {}, clock()

    def done(self, step: str) -> None:
        """The time since the previous step ended (or the clock's start) is `step`'s."""
        now = self.clock()
        self.seconds[step] = round(self.seconds.get(step, 0.0) + now - self._last, 2)
        self._last = now


def measure(campaign_op: str, runs_op: str, rounds: int, warmup_ms: float, rep_ms: float,
            peak_gbps: float | None, peak_tflops: float | None, device: str = "torch",
            ops_at_once: int = 1, arms_together: bool = False, gpus_at_once: int = 1) -> dict:
    """final.json's record of one operator (module docstring). A peak given as None is the card's (PEAKS);
    a card PEAKS does not know needs both given."""
    phases = PhaseClock()
    with open(os.path.join(campaign_op, "kforge.json"), encoding="utf-8") as f:
        experiment = json.load(f)
    harness_file = os.path.join(campaign_op, "harness.py")
    worker = program_worker.Worker(program_worker.program_devices.make_device(device, 0),
                                   os.path.join(os.environ.get("TMPDIR", "/tmp"), "kforge-measure"))
    gpu = worker.device.describe()["name"]
    peak_gbps, peak_tflops = ceilings(gpu, peak_gbps, peak_tflops)
    params = experiment["problem"]["parameters"]
    from kforge.tritonbench_g.harness import operator
    program = experiment["problem"]["program"]  # <data>/kernels/<op>.py
    data_dir, op = os.path.dirname(os.path.dirname(program)), os.path.splitext(os.path.basename(program))[0]
    h = harness_with_host_sweep(lambda: operator(data_dir, op), operator.cache_clear, worker.device,
                                experiment.get("seed", 0))
    inputs = SizeInputs(h)
    original_module = variant_module(experiment, [], worker)
    calls = {"original": h.bind(original_module)}
    phases.done("setup")  # the worker (a CUDA context), the harness and its sweep, the original's module
    # The original's first call on every size before anything else runs it: an @triton.autotune original
    # tunes there (compiling and benchmarking its list per key), so these seconds are the autotuner's own
    # cost. (Measured after the checks, as until 2026-12-07, they were 0.001-0.004 s: the checks, which
    # run the same module, had tuned it.)
    first_original, fault = compile_outside_the_lock(calls, inputs, worker.device.healthy)
    phases.done("original_first_calls")
    candidates = {}
    for name in ("kforge", "random"):
        path = os.path.join(runs_op, name + ".jsonl")
        best = best_trial(path)
        wall, clock, trials = search_seconds(path)
        seconds = wall if wall is not None else clock
        if best is None:
            if trials:
                candidates[name] = {"configuration": None, "ms": None, "correct": False,
                                    "errors": ["no correct trial in the search"], "search_gpu_s": seconds,
                                    "search_clock_s": clock, "trials": trials}
            continue
        knobs = knobs_for(params, best["configuration"])
        correct, errors = check(experiment, harness_file, knobs, worker) if fault is None else \
            (False, [f"not checked: the GPU faulted in {fault_text(fault)}"])
        if fault is None and not correct and not worker.device.healthy():
            fault = check_fault(name, errors[0])
        candidates[name] = {"configuration": best["configuration"], "correct": correct, "errors": errors,
                            "search_gpu_s": seconds, "search_clock_s": clock, "trials": trials,
                            "search_best_ms": best["time_ms"]}
        calls[name] = h.bind(variant_module(experiment, knobs, worker))
    # Elements the original changed between its own calls (a race), as the checks above measured them on
    # every size (the candidates' allowance: Worker._pool_instability); then the checks' inputs and
    # references go back to the GPU before the timing moves its sizes there one at a time.
    unstable = sum(n for s in worker.shapes for n, _ in s.unstable.values())
    phases.done("checks")  # the winners' modules and checks on every size (the reference's calls with them)
    if fault is None:  # (after a fault nothing more runs on the GPU in this process)
        worker.release_inputs()
    t0 = time.perf_counter()
    winners = {n: c for n, c in calls.items() if n != "original"}
    if fault is None:  # the winners' compiles, outside the lock too
        _, fault = compile_outside_the_lock(winners, inputs, worker.device.healthy)
    autotune = autotune_record(original_module, first_original["original"])
    phases.done("winners_first_calls")
    with worker.lock.hold(exclusive=True):  # the GPU alone: other searches on it wait to time
        phases.done("lock_wait")
        if fault is None:
            times, errors, fault = time_interleaved(calls, inputs, rounds, warmup_ms, rep_ms, worker.device.healthy)
        else:
            times, errors = abandoned({n: [] for n in calls}, {n: [] for n in calls}, len(inputs), fault)
        phases.done("timing")
        profiled = ["original"] + [n for n in candidates if n in calls and not errors[n] and candidates[n]["correct"]]
        cupti = {"size": len(inputs) - 1, **(profile_calls(calls, profiled, inputs[-1], worker.device) if fault is None
                                             else {"error": f"not profiled: the GPU faulted in {fault_text(fault)}"})}
    phases.done("cupti")
    for name in candidates:
        if name in times:
            candidates[name]["ms"] = times[name]
            candidates[name]["errors"] += errors[name]
            candidates[name]["correct"] = candidates[name]["correct"] and not errors[name]
    original = times["original"]
    workers = experiment.get("evaluator", {}).get("params", {}).get("workers_per_device", 1)
    return {"op": h.op, "gpu": gpu, "sizes": [str(i) for i in range(len(inputs))], "ops_at_once": ops_at_once,
            "arms_together": arms_together, "gpus_at_once": gpus_at_once, "workers_per_device": workers,
            "start_configurations": start_count(experiment),
            "start_is_original": program_worker.start_is_original(params),
            "protocol": {"warmup_ms": warmup_ms, "rep_ms": rep_ms, "interleaved": True, "rounds": rounds,
                         "timer": "triton.testing.do_bench, median, L2 flushed", "seconds": round(time.perf_counter() - t0, 1)},
            "original": {"ms": original, "errors": errors["original"],
                         "unstable_elements": unstable,
                         "gbps": [rate(h.perf.get_gbps, inputs.host(i), ms) for i, ms in enumerate(original)],
                         "tflops": [rate(h.perf.get_tflops, inputs.host(i), ms) for i, ms in enumerate(original)]},
            "candidates": candidates, "peak": {"gbps": peak_gbps, "tflops": peak_tflops}, "cupti": cupti,
            "phases_s": phases.seconds,
            # what the searches' timer flushed (the program worker's, the same code in the same device call)
            "search_timer": {"flush_bytes": worker.device.describe().get("flush_bytes")},
            **({"autotune": autotune} if autotune else {}), **({"gpu_fault": fault} if fault else {})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("campaign_op", help="the importer's folder of one operator")
    ap.add_argument("--runs", required=True, help="the folder with kforge.jsonl / random.jsonl; final.json goes here")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup-ms", type=float, default=25.0)
    ap.add_argument("--rep-ms", type=float, default=100.0)
    ap.add_argument("--peak-gbps", type=float, default=None, help="default: the card's copy rate (PEAKS)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="default: the card's dense bf16 rate (PEAKS)")
    ap.add_argument("--ops-at-once", type=int, default=1,
                    help="how many operators' searches shared the GPU (recorded in final.json)")
    ap.add_argument("--arms-together", action="store_true",
                    help="the kforge and random searches ran at the same time (recorded in final.json)")
    ap.add_argument("--gpus-at-once", type=int, default=1,
                    help="the lanes of the call: GPUs of the machine each searching and measuring one operator "
                         "at a time, sharing its cores and host memory (recorded in final.json)")
    a = ap.parse_args(argv)
    result = measure(a.campaign_op, a.runs, a.rounds, a.warmup_ms, a.rep_ms, a.peak_gbps, a.peak_tflops,
                     ops_at_once=a.ops_at_once, arms_together=a.arms_together, gpus_at_once=a.gpus_at_once)
    os.makedirs(a.runs, exist_ok=True)
    with open(os.path.join(a.runs, "final.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=lambda v: None)
        f.write("\n")
    summary = {n: c.get("correct") for n, c in result["candidates"].items()}
    steps = ", ".join(f"{k} {v:.1f}" for k, v in result["phases_s"].items())
    print(f"{result['op']}: {len(result['sizes'])} sizes measured in {result['protocol']['seconds']} s; "
          f"correct {summary}; steps (s): {steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
