"""kforge's program worker: measures variants of a Triton *program* (a Python module whose wrapper functions
launch Triton kernels), the second worker kind of kforge's runner beside kforge-worker.

Run as ``python <repo>/python/kforge/triton/program_worker.py --device N [--cache DIR] [--fake]`` (or
``-m kforge.triton.program_worker`` with python/ on PYTHONPATH). ``--fake`` runs on ``FakeDevice``
(numpy, no GPU) for tests; ``--count`` prints the number of visible GPUs and exits; ``--knobs FILE``
prints the knobs ``source_ops.find_knobs`` finds in a program as a problem's ``parameters:`` list.

Protocol (the runner's, evaluators/runner/runner.hpp): one JSON object per line on stdin, one answer per
line on stdout (flushed; fd 1 points to stderr otherwise, so a program's prints cannot corrupt it).

``{"op": "hello"}`` -> ``{"device": 0, "name": "NVIDIA H200", "cc_major": 9, ..., "worker": "program",
"pid": N, "python": "3.12.3", "triton": "3.6.0"}``

``{"op": "exit"}`` -> no answer; exit 0.

``{"op": "evaluate", "id": N, "program": "/abs/module.py", "call": "add_wrapper", "end_marker": "####",
"inputs": {"file": "/abs/inputs.py", "function": "shapes"}, "adapter": {"file": "/abs/harness.py",
"function": "bind"} (optional), "knobs": [{"kind": "literal", "site":
"add_wrapper", "target": "BLOCK_SIZE", "value": 256}, ...], "time_shapes": [-1], "seed": 0,
"tolerances": {"f32": {"rel": 1e-5, "abs": 1e-6}}, "timing": {"warmup": 3, "min_repeats": 15,
"max_repeats": 200, "target_rel_ci": 0.01, "max_seconds": 3.0, "flush_l2": true}, "profile": true,
"profile_calls": 5, "compile_timeout_s": 60}``

-> ``{"id": N, "status": "ok", "error": "", "times_ms": [...], "metrics": {...}, "compile_s": ...,
"check_s": ..., "benchmark_s": ..., "profile_s": ..., "fatal": false, "notes": ""}``, and
``"original_failed": true`` where the inputs or the original failed in the setup (every variant would
fail the same way: the program evaluator stops the run)

What an evaluation does:

1. The *candidate* is the program's source (cut at the first line starting with ``end_marker``, e.g. the
   ``####`` line before TritonBench-G's test code) with the knobs applied by ``source_ops`` (site
   operators first, then ``@triton.heuristics`` pins, then ``@triton.autotune`` lists replaced by the
   values: ``apply_config``). A knob that does not apply is an ``invalid`` variant. The source is written
   to ``<cache>/programs/<sha>/<name>.py`` and imported from there (Triton's JIT needs a file).
2. The *inputs*: ``function()`` of the inputs file, after seeding Python's, numpy's and torch's
   generators with ``seed``, returns a list of calls, one per shape: a tuple of positional arguments or
   ``{"args": [...], "kwargs": {...}}``. They are made once per worker and kept pristine.
   With an ``adapter``, ``function(module)`` of the adapter's file returns the callable that is called with
   each shape's arguments (e.g. a speed harness's ``call_op`` bound to the variant's module,
   kforge.tritonbench_g.harness); otherwise the callable is the module's ``call`` function.
3. The *reference* is the original program (cut, no knobs) on copies of the same inputs, once per shape
   per worker. It also tells which tensor arguments the program writes (changed by the call) and which
   of those it only writes (its result does not change when they are poisoned first), which elements of
   its returned tensors it never writes (two more calls with the blocks poisoned two ways: what reads
   back as each poison; never compared, for any candidate), and whether it reproduces itself (a second
   call within the tolerances; if not, every candidate fails with that message). Every call whose result
   is compared (the reference's and the checks') starts from Python's, numpy's and torch's generators
   seeded with ``seed + 1``, so numbers a program draws inside the call are the same in each.
4. Check, every shape: copies of the pristine inputs; write-only arguments poisoned (NaN for floats, -1
   / all ones for integers); blocks of the sizes of the reference's returned tensors allocated, poisoned
   and freed (torch's caching allocator hands them to the wrapper's ``torch.empty``); the wrapper called;
   EVERY returned tensor (through tuples, lists, dicts) and EVERY tensor argument compared with the
   reference's: |out - ref| <= abs + rel |ref| per dtype, none tighter than the least precise
   floating-point input's (``call_tolerances``; NaN where the reference is finite fails);
   other returned values compared for equality.
5. Time, shapes ``time_shapes`` (default the last): ``warmup`` calls, then rounds of calls, each after
   restoring the arguments the program reads and writes and an L2 flush, between CUDA events, until the
   95% confidence interval of the median is within ``target_rel_ci`` of it (order statistics), or
   ``max_repeats`` / ``max_seconds``. ``times_ms`` are the first timed shape's samples.
   Timing and profiling hold the GPU's lock exclusively, checks hold it shared (an advisory ``flock`` on
   ``$KFORGE_LOCK_DIR`` or the temporary folder's ``kforge-gpu-<PCI bus id>.lock``, the file kforge-worker
   uses): several workers on one GPU compile (the first call, outside the lock) while another times; a
   compile inside a check (a new specialisation at another size) lets go of the shared lock meanwhile.
6. Profile (``profile``): ``profile_calls`` more calls, each alone inside a CUPTI activity session
   (``torch.profiler``, CUDA activities): the kernels each call launched and their own durations.
   Metrics ``time.kernels_ms.shapeK`` (median over calls of the sum of the call's kernel durations),
   ``kernels.count.shapeK`` and ``time.overhead_ms.shapeK`` (the call's event time minus its kernels).
   ``"metrics": [CUPTI metric names]``: one more call under kforge's range profiler (``cupti_metrics``:
   libkforge_cupti.so, kernel replay, one range per kernel), one value per metric for the call (counts
   summed, rates and percentages weighted by the kernels' durations) with ``cupti.kernels``,
   ``cupti.passes`` and ``cupti.ranges_dropped``; unavailable metrics are a note, not a failure.

Statuses: ``invalid`` (a knob does not apply), ``compile_failed`` (the variant does not import, or Triton
does not compile a kernel: its message), ``timeout`` (Triton's compile of one of the candidate's kernels
took longer than ``compile_timeout_s``: kforge.triton.bounded_compile; the original's compile is not
bounded), ``launch_failed`` (the wrapper raised), ``wrong_result``,
``crashed`` with ``fatal: true`` (the device is broken: the worker exits and the runner starts another).
A hang is the runner's timeout.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import hashlib
import importlib.util
import itertools
import json
import math
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

if __package__ in (None, ""):  # run by path: python/ onto the path for the kforge package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kforge.triton import bounded_compile, line_protocol, program_devices, source_ops  # noqa: E402
from kforge.triton.line_protocol import BadRequest, request_id  # noqa: E402

PROTOCOL = 1
_STARTED = time.perf_counter()  # the worker's start (after Python's own), for the setup's account
DEFAULT_TIMING = {"warmup": 3, "min_repeats": 15, "max_repeats": 200, "target_rel_ci": 0.01,
                  "max_seconds": 3.0, "flush_l2": True}
# |out - ref| <= abs + rel |ref| (docs/kernel.md's defaults); integers and bools compare exactly.
DEFAULT_TOLERANCES = {"f32": (1e-5, 1e-6), "f64": (1e-12, 1e-14), "f16": (1e-2, 1e-3), "bf16": (2e-2, 1e-2)}
# The largest share of a value's elements the original may change from call to call on the same inputs
# (a race in the original) and still serve as the reference: candidates may then differ from it in twice
# as many elements as its own calls did, and at every size at least twice the largest share of the value
# any size's calls changed (Worker._measure_instability, _pool_instability). Measured on TritonBench-G's
# originals that differ from themselves: 0.001-0.6% of their elements (docs/tritonbench-g.md).
UNSTABLE_SHARE = 0.01
KNOB_KINDS = ("literal", "launch", "heuristic", "autotune")


class VariantFailure(Exception):
    """A variant's failure: an answer with this status, not an error of the worker."""

    def __init__(self, status: str, message: str, fatal: bool = False):
        super().__init__(message)
        self.status, self.message, self.fatal = status, message, fatal


# --- statistics ---------------------------------------------------------------------------------------

def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return math.nan
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def relative_ci(xs: list[float]) -> float:
    """Width of the 95% confidence interval of the median (order statistics) relative to the median
    (kforge-worker's rule)."""
    if len(xs) < 3:
        return math.inf
    s = sorted(xs)
    n = len(s)
    half = 0.98 * math.sqrt(n)
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half))
    med = median(s)
    return (s[hi] - s[lo]) / med if med > 0 else math.inf


def adaptive_samples(time_round, timing: dict, clock=time.perf_counter) -> list[float]:
    """Samples from rounds of ``time_round(k)`` (k calls -> k milliseconds) until the median's relative
    CI is within ``target_rel_ci`` (after ``min_repeats``), or ``max_repeats`` or ``max_seconds``."""
    samples: list[float] = []
    round_size = max(5, timing["min_repeats"] // 2)
    start = clock()
    while True:
        samples += time_round(min(round_size, max(1, timing["max_repeats"] - len(samples))))
        n = len(samples)
        if n >= timing["max_repeats"] or clock() - start > timing["max_seconds"]:
            break
        if n >= timing["min_repeats"] and relative_ci(samples) <= timing["target_rel_ci"]:
            break
    return samples


def summarize_kernels(per_call: list[list[tuple[str, float]]]) -> dict:
    """Median over calls of the kernels' summed durations, the kernel count and the distinct names."""
    sums = [sum(ms for _, ms in call) for call in per_call]
    counts = [len(call) for call in per_call]
    names = list(dict.fromkeys(name for call in per_call for name, _ in call))
    return {"kernels_ms": median(sums) if sums else math.nan, "count": median(counts) if counts else 0,
            "names": names}


# --- values -------------------------------------------------------------------------------------------

def tensors_in(value: Any, device, path: str) -> list[tuple[str, Any]]:
    """(path, tensor) of every tensor in a returned value, through tuples, lists and dicts."""
    if device.is_tensor(value):
        return [(path, value)]
    if isinstance(value, (tuple, list)):
        return [t for i, v in enumerate(value) for t in tensors_in(v, device, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in tensors_in(v, device, f"{path}[{k!r}]")]
    return []


def clone_value(value: Any, device):
    if device.is_tensor(value):
        return device.clone(value)
    if isinstance(value, tuple):
        return tuple(clone_value(v, device) for v in value)
    if isinstance(value, list):
        return [clone_value(v, device) for v in value]
    if isinstance(value, dict):
        return {k: clone_value(v, device) for k, v in value.items()}
    return value


def call_tolerances(tolerances: dict, input_dtypes: set) -> dict:
    """The tolerances for the values a call produces from floating-point inputs of ``input_dtypes``: each
    dtype's own, but none tighter than the least precise input's. A result computed from f16 data is
    no more exact than f16 arithmetic allows once a knob changes the order of a sum (TritonBench-G's
    bgmv_expand_slice: an f32 output from f16 weights, 518.5 against 519.0 for another block size), whatever
    the dtype it is stored in."""
    floor = [tolerances[d] for d in input_dtypes if d in tolerances]
    if not floor:
        return dict(tolerances)
    rel, abs_ = max(t[0] for t in floor), max(t[1] for t in floor)
    return {d: (max(t[0], rel), max(t[1], abs_)) for d, t in tolerances.items()}


def compare_values(out: Any, ref: Any, device, tolerances: dict, path: str = "returned",
                   ignore: dict | None = None, allow: dict | None = None) -> str | None:
    """The first difference between a candidate's value and the reference's, or None. ``ignore`` maps a
    returned tensor's path to a mask of elements not compared (those the original never writes);
    ``allow`` maps a path to how many of its elements may differ (where the original differs from
    itself: ``Worker._reference``)."""
    if device.is_tensor(ref):
        if not device.is_tensor(out):
            return f"{path}: {type(out).__name__} where the reference returned a tensor"
        return device.compare(path, out, ref, value_tolerance(ref, device, tolerances), (ignore or {}).get(path),
                              (allow or {}).get(path, 0))
    if isinstance(ref, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            return f"{path}: {_kind(out)} where the reference returned {_kind(ref)}"
        for i, (o, r) in enumerate(zip(out, ref)):
            if (m := compare_values(o, r, device, tolerances, f"{path}[{i}]", ignore, allow)) is not None:
                return m
        return None
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            return f"{path}: {_kind(out)} where the reference returned {_kind(ref)}"
        for k in ref:
            if (m := compare_values(out[k], ref[k], device, tolerances, f"{path}[{k!r}]", ignore, allow)) is not None:
                return m
        return None
    if isinstance(ref, float) and isinstance(out, (int, float)):
        tol = tolerances.get("f32", (0.0, 0.0))  # Python floats mostly come from fp32 tensors
        if math.isnan(ref) and math.isnan(out):
            return None
        if abs(out - ref) <= tol[1] + tol[0] * abs(ref):
            return None
        return f"{path}: {out!r} vs reference {ref!r}"
    try:
        same = out == ref
        same = bool(same)
    except Exception:
        same = False
    return None if same else f"{path}: {out!r} vs reference {ref!r}"


def value_tolerance(ref, device, tolerances: dict) -> tuple[float, float]:
    """(rel, abs) for comparing with the tensor ``ref``: its dtype's for floating point, exact otherwise."""
    return tolerances.get(device.dtype_name(ref), (0.0, 0.0)) if device.is_floating(ref) else (0.0, 0.0)


def paired_tensors(first: Any, second: Any, device, path: str = "returned"):
    """``(path, a, b)`` for each tensor ``a`` of ``first`` that has a tensor ``b`` at the same place in
    ``second`` (through tuples, lists and dicts of like structure; paths as compare_values names them)."""
    if device.is_tensor(first) and device.is_tensor(second):
        yield path, first, second
    elif isinstance(first, (tuple, list)) and isinstance(second, (tuple, list)) and len(first) == len(second):
        for i, (a, b) in enumerate(zip(first, second)):
            yield from paired_tensors(a, b, device, f"{path}[{i}]")
    elif isinstance(first, dict) and isinstance(second, dict) and set(first) == set(second):
        for k in first:
            yield from paired_tensors(first[k], second[k], device, f"{path}[{k!r}]")


def mismatch_counts(out: Any, ref: Any, device, tolerances: dict, ignore: dict | None = None,
                    path: str = "returned") -> dict:
    """``{path: (elements that differ, elements)}`` for each tensor of ``ref`` with a like tensor in
    ``out`` (paths as compare_values names them); other leaves are left to compare_values."""
    counts = {}
    for p, o, r in paired_tensors(out, ref, device, path):
        n = device.mismatches(o, r, value_tolerance(r, device, tolerances), (ignore or {}).get(p))
        if n is not None:
            counts[p] = (n, math.prod(device.shape_of(r)))
    return counts


def unwritten_masks(first: Any, second: Any, device, path: str = "returned") -> dict:
    """The elements of returned tensors a program leaves unwritten, as ``{path: mask}`` (paths as
    compare_values names them): ``first`` and ``second`` are its results on the same inputs with the
    allocator's blocks poisoned with pattern 0 and pattern 1; an element that reads back as each pattern
    was never written (a deterministic written element cannot be both)."""
    masks = {}
    for p, a, b in paired_tensors(first, second, device, path):
        mask = device.unwritten(a, b)
        if mask is not None:
            masks[p] = mask
    return masks


def _kind(v) -> str:
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)}"
    if isinstance(v, dict):
        return f"a dict with keys {sorted(map(str, v))}"
    return type(v).__name__


# --- sources ------------------------------------------------------------------------------------------

def cut_program(source: str, end_marker: str | None) -> str:
    """The source up to the first line that starts with `end_marker` (the program without its test code),
    followed by the top-level imports of the part cut off: a program whose wrapper uses a module that only
    its test code imports (TritonBench-G's block_sparse_attn uses ``torch`` so) runs as it did when the
    whole file was imported. Line numbers of the kept part do not change."""
    if not end_marker:
        return source
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(end_marker):
            kept = "".join(lines[:i])
            try:
                tail = ast.parse("".join(lines[i:]))
            except SyntaxError:
                return kept
            imports = [ast.get_source_segment("".join(lines[i:]), node) for node in tail.body
                       if isinstance(node, (ast.Import, ast.ImportFrom))]
            if imports:
                kept += ("" if kept.endswith("\n") or not kept else "\n") + "\n".join(imports) + "\n"
            return kept
    return source


def apply_knobs(source: str, knobs: list[dict]) -> str:
    """The source with every knob set (raises source_ops.SourceOpError when one does not apply). Site
    operators first (they do not move lines), then heuristics pins, then autotune lists (which delete
    lines)."""
    heuristics: dict[str, dict] = {}
    autotune: dict[str, dict] = {}
    for knob in knobs:
        kind, target, value = knob["kind"], knob["target"], knob["value"]
        if kind == "literal":
            text = value if isinstance(value, str) else source_ops._literal_text(value)
            source = source_ops.lift_literal(source, knob["site"], target, text)
        elif kind == "launch":
            if target in source_ops.LAUNCH_OPTIONS:
                source = source_ops.set_launch_keyword(source, knob["site"], target, value)
            else:
                source = source_ops.set_constexpr_at_launch(source, knob["site"], target, value)
        elif kind == "heuristic":
            heuristics.setdefault(knob["kernel"], {})[target] = value
        elif kind == "autotune":
            autotune.setdefault(knob["kernel"], {})[target] = value
        else:
            raise BadRequest(f"knob kind {kind!r} (expected one of {', '.join(KNOB_KINDS)})")
    for kernel, values in heuristics.items():
        source = source_ops.pin_heuristics(source, kernel, values)
    for kernel, values in autotune.items():
        source = source_ops.apply_config(source, kernel, values)
    return source


class ModuleLoader:
    """Imports sources from files under `directory`, one module per distinct source (kept, bounded)."""

    def __init__(self, directory: str, keep: int = 64):
        self.directory = directory
        self.keep = keep
        self.modules: dict[str, Any] = {}

    def load(self, source: str, file_name: str, search_dir: str):
        digest = hashlib.sha256(source.encode()).hexdigest()[:20]
        if digest in self.modules:
            return self.modules[digest]
        folder = os.path.join(self.directory, digest)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, file_name)
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(source)
            os.replace(tmp, path)
        if search_dir and search_dir not in sys.path:
            sys.path.append(search_dir)  # the program's sibling modules
        name = f"kforge_program_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        if len(self.modules) >= self.keep:
            old = next(iter(self.modules))
            sys.modules.pop(f"kforge_program_{old}", None)
            del self.modules[old]
        self.modules[digest] = module
        return module


class DeviceLock:
    """The GPU's measurement lock shared with kforge-worker (evaluators/cuda/worker/device_lock.hpp):
    ``hold(exclusive)`` is a context holding the advisory flock shared (checks) or exclusive (timing and
    profiling). The kernel drops it when the process dies. A lock that cannot be opened is a note and no
    lock (measurements then are not isolated from other processes), never a failure."""

    def __init__(self, device_key: str):
        name = "kforge-gpu-" + "".join(c if c.isalnum() else "_" for c in device_key) + ".lock"
        folder = os.environ.get("KFORGE_LOCK_DIR") or tempfile.gettempdir()
        self.path = os.path.join(folder, name)
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            print(f"program worker: cannot open the device lock {self.path} ({e}): measurements are not "
                  "isolated from other processes on this GPU", file=sys.stderr)
            self.fd = -1

        self.mode: int | None = None  # fcntl.LOCK_SH or LOCK_EX while held

    @contextlib.contextmanager
    def hold(self, exclusive: bool):
        if self.fd < 0:
            yield
            return
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        fcntl.flock(self.fd, mode)
        self.mode = mode
        try:
            yield
        finally:
            self.mode = None
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def shared_released(self):
        """Lets go of a shared hold for the block and takes it again after (waiting while another process
        times); an exclusive hold, or none, is left as it is: a timing is never interrupted."""
        if self.fd < 0 or self.mode != fcntl.LOCK_SH:
            yield
            return
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        self.mode = None
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_SH)
            self.mode = fcntl.LOCK_SH


def _failure_text(error: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _caused_by(error: BaseException, names: tuple) -> bool:
    seen = error
    while seen is not None:
        if type(seen).__name__ in names:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _is_compile_error(error: BaseException) -> bool:
    return _caused_by(error, ("CompilationError", "CompileTimeAssertionFailure", "PTXASError",
                              "ChildCompileError"))


def _is_compile_timeout(error: BaseException) -> bool:
    return _caused_by(error, ("CompileTimeout",))


def _is_device_error(error: BaseException) -> bool:
    text = f"{type(error).__name__}: {error}"
    return isinstance(error, program_devices.DeviceBroken) or "CUDA error" in text or \
        "illegal memory access" in text or "AcceleratorError" in text


# --- the worker ---------------------------------------------------------------------------------------

class Shape:
    """One call of the inputs: the pristine arguments and what the reference made of them."""

    def __init__(self, args: list, kwargs: dict):
        self.args, self.kwargs = args, kwargs
        self.ref_result = None
        self.ref_args: dict = {}        # argument path -> the reference's tensor after the call
        self.written: set = set()       # argument paths the reference changed
        self.write_only: set = set()    # ... whose values before the call do not matter
        self.result_blocks: list = []   # (shape, dtype) of the reference's returned tensors
        self.unwritten: dict = {}       # returned tensor's path -> mask of elements the original never writes
        self.allow: dict = {}           # value's path -> elements that may differ (the original's own instability)
        self.unstable: dict = {}        # value's path -> (elements the original's own calls changed, elements)
        self.input_dtypes: set = set()  # of the floating-point tensor arguments (call_tolerances)
        self.ref_ms = math.nan


class Worker:
    def __init__(self, device, cache_dir: str):
        self.device = device
        self.cache_dir = cache_dir
        self.loader = ModuleLoader(os.path.join(cache_dir, "programs"))
        self.inputs_key = None
        self.shapes: list[Shape] = []
        self.reference_key = None
        self.call_seed = 0
        self.profiler_ready = False
        self.profiler_start: threading.Thread | None = None  # the profiler's start, beside the setup
        self.profiler_start_s = math.nan                      # what that start took, in its thread
        # Where the setup's time went (worker start, inputs, reference), reported in the metrics of the
        # first answer after it ran: seconds a wall budget that includes setup does not search.
        self.setup_account: dict = {"setup.worker_start_s": time.perf_counter() - _STARTED}
        # The original's file and the lines of it that ran in its reference calls (knobs_not_run).
        self.traced_file: str | None = None
        self.traced_lines: set[int] = set()
        info = device.describe()
        self.lock = DeviceLock(info.get("pci_bus_id") or f"{info['name']}-{device.index}")
        bounded_compile.around(self._compiling)

    @contextlib.contextmanager
    def _compiling(self):
        """Around each of Triton's compiles: a check's first call at a size may compile (a new
        specialisation) under the shared lock, and seconds of CPU work there would hold off every other
        worker's timing. The GPU work queued so far is finished first, so none of it runs beside a timing."""
        if self.lock.mode != fcntl.LOCK_SH:  # none held, or a timing's exclusive hold: kept as it is
            yield
            return
        self.device.synchronize()
        with self.lock.shared_released():
            yield

    def hello(self) -> dict:
        info = self.device.describe()
        info.update({"worker": "program", "protocol": PROTOCOL, "pid": os.getpid(),
                     "python": ".".join(map(str, sys.version_info[:3]))})
        try:
            import triton
            info["triton"] = triton.__version__
        except Exception:
            info["triton"] = None
        return info

    # -- the argument tensors of a call, by path: positional "args[i]" and keyword "kwargs['k']"
    def _arg_tensors(self, args: list, kwargs: dict) -> list[tuple[str, Any]]:
        found = []
        for i, a in enumerate(args):
            found += tensors_in(a, self.device, f"argument {i}")
        for k, a in kwargs.items():
            found += tensors_in(a, self.device, f"argument {k!r}")
        return found

    def _fresh(self, shape: Shape, poison: bool):
        args = [clone_value(a, self.device) for a in shape.args]
        kwargs = {k: clone_value(v, self.device) for k, v in shape.kwargs.items()}
        if poison:
            for path, t in self._arg_tensors(args, kwargs):
                if path in shape.write_only:
                    self.device.poison(t)
        return args, kwargs

    def _setup(self, req: dict, tolerances: dict) -> None:
        """Inputs and reference results, made once per (program, inputs, seed)."""
        inputs = req["inputs"]
        key = (inputs["file"], inputs["function"], req["seed"], _mtime(inputs["file"]))
        if key != self.inputs_key:
            t0 = time.perf_counter()
            self.inputs_key, self.reference_key, self.shapes = None, None, []
            self.device.seed(req["seed"])
            try:
                with open(inputs["file"], encoding="utf-8") as f:
                    module = self.loader.load(f.read(), os.path.basename(inputs["file"]),
                                              os.path.dirname(inputs["file"]))
                fn = getattr(module, inputs["function"])
                with self.device.inputs_context():
                    calls = list(fn())
            except Exception as e:
                raise VariantFailure("launch_failed", "the inputs function failed:\n" + _failure_text(e))
            for i, call in enumerate(list(calls)):
                if isinstance(call, dict):
                    self.shapes.append(Shape(list(call.get("args", [])), dict(call.get("kwargs", {}))))
                elif isinstance(call, (tuple, list)):
                    self.shapes.append(Shape(list(call), {}))
                else:
                    self.shapes.append(Shape([call], {}))
            if not self.shapes:
                raise VariantFailure("launch_failed", "the inputs function returned no calls")
            self.inputs_key = key
            self.call_seed = req["seed"] + 1  # not the inputs' own stream: draws in a call differ from them
            self.setup_account["setup.inputs_s"] = time.perf_counter() - t0
        rkey = (req["program"], req.get("end_marker"), req["call"], json.dumps(req.get("adapter")),
                _mtime(req["program"]), key)
        if rkey == self.reference_key:
            return
        t1 = time.perf_counter()
        try:
            module = self.import_variant(req, [])
            wrapper = self._bind(req, module)
        except VariantFailure as e:
            raise VariantFailure("launch_failed", "the original program: " + e.message)
        self.traced_lines = set()
        self.traced_file = getattr(module, "__file__", None)
        for i, shape in enumerate(self.shapes):
            try:
                self._reference(shape, wrapper, tolerances)
            except VariantFailure:
                raise
            except Exception as e:
                fatal = _is_device_error(e) or not self.device.healthy()
                raise VariantFailure("crashed" if fatal else "launch_failed",
                                     f"the original program fails on shape {i}:\n" + _failure_text(e), fatal)
        self._pool_instability()
        if self.traced_file:
            self.setup_account.update(knobs_not_run(self.traced_file, req.get("knobs", []), self.traced_lines))
        # The setup's peak (three calls' copies at the largest size) goes back to the GPU, for the other
        # workers sharing it; what stays is each size's inputs, reference result and written arguments.
        self.device.release_cached_memory()
        self.setup_account.update(self.device.memory_account())
        self.reference_key = rkey
        self.setup_account["setup.reference_s"] = time.perf_counter() - t1

    def release_inputs(self) -> None:
        """Drops every size's inputs and reference results (what ``_setup`` made) and hands the allocator's
        cache back to the GPU; the next ``evaluate`` makes them again. For a caller that checked with this
        worker and needs the GPU's memory for something else next (the TritonBench-G final measurement).
        Never raises: on a GPU a sticky fault has broken, handing the cache back fails too, and the caller
        is recording that fault."""
        self.inputs_key, self.reference_key, self.shapes = None, None, []
        try:
            self.device.release_cached_memory()
        except Exception:  # noqa: BLE001 - the fault is the caller's record; the state above is reset
            pass

    def _pool_instability(self) -> None:
        """A race is the original's, not one size's: two further calls at one size may happen to agree
        where the race is there all the same (TritonBench-G's apply_penalty on an H100: a size whose two
        calls agreed, its best candidate then 1 of 3,906,816 elements off there; attention_fwd_triton2:
        384 elements at its smallest size in one measurement, none in the next). So, once any size shows
        a value unstable, that value gets at every size at least twice the largest share of its elements
        any size's calls changed (each within UNSTABLE_SHARE, or the setup has already failed)."""
        share: dict = {}
        for shape in self.shapes:
            for path, (n, total) in shape.unstable.items():
                if n and total:
                    share[path] = max(share.get(path, 0.0), n / total)
        for shape in self.shapes:
            for path, (_, total) in shape.unstable.items():
                if path in share:
                    shape.allow[path] = max(shape.allow.get(path, 0), math.ceil(2 * share[path] * total))

    def _start_profiler(self) -> None:
        """The profiler's one-time start (CUPTI and Kineto: a median 4.9 s of a 30 s TritonBench-G search on
        the H100), once per worker, in a thread beside the setup (inputs and reference: a median 3.4 s),
        and outside the GPU's exclusive lock: started inside it, every other worker on the GPU waits those
        seconds. The no-op session it runs may record the setup's kernels; nothing reads them. A failure
        here is left to the real profile, which records it as a note."""
        if self.profiler_ready or self.profiler_start is not None:
            return

        def start() -> None:
            t0 = time.perf_counter()
            try:
                self.device.kernel_activity(lambda: None, lambda: None, 1, False)
            except Exception:
                pass
            self.profiler_start_s = time.perf_counter() - t0

        self.profiler_start = threading.Thread(target=start, name="kforge-profiler-start", daemon=True)
        self.profiler_start.start()

    def _profiler_started(self) -> None:
        """Waits for the start begun by _start_profiler (no profile may begin beside it); the first answer
        reports what the start took and how much of it the setup did not hide (setup.profiler_wait_s)."""
        if self.profiler_ready:
            return
        t0 = time.perf_counter()
        self.profiler_start.join()
        self.profiler_ready = True
        self.setup_account["setup.profiler_s"] = self.profiler_start_s
        self.setup_account["setup.profiler_wait_s"] = time.perf_counter() - t0

    def _reference(self, shape: Shape, wrapper, tolerances: dict) -> None:
        dev = self.device
        pristine = dict(self._arg_tensors(shape.args, shape.kwargs))
        shape.input_dtypes = {dev.dtype_name(t) for t in pristine.values() if dev.is_floating(t)}
        tolerances = call_tolerances(tolerances, shape.input_dtypes)
        args, kwargs = self._fresh(shape, poison=False)
        start = time.perf_counter()
        result = self._seeded_call(wrapper, args, kwargs)
        dev.synchronize()
        shape.ref_ms = (time.perf_counter() - start) * 1e3
        shape.ref_result = clone_value(result, dev)
        shape.result_blocks = [(dev.shape_of(t), str(t.dtype).replace("torch.", ""))
                               for _, t in tensors_in(result, dev, "r")]
        after = self._arg_tensors(args, kwargs)
        shape.written = {path for path, t in after if not dev.equal(t, pristine[path])}
        # An argument the original leaves as it was is compared with the pristine input itself: no copy
        # (a worker holds its sizes' inputs once, not twice: GPU memory is what limits workers per GPU).
        shape.ref_args = {path: dev.clone(t) if path in shape.written else pristine[path] for path, t in after}
        del args, kwargs, after, result
        # Elements of the returned tensors the original never writes (e.g. padding left as torch.empty
        # gave it: TritonBench-G's attention_fwd_triton2 stores 96 of 128 columns) are found by two more
        # calls with the allocator's blocks poisoned two ways; they are not compared, for any candidate.
        a1, k1 = self._fresh(shape, poison=False)
        dev.poison_pool(shape.result_blocks, pattern=0)
        with traced_lines(self.traced_file, self.traced_lines):  # which knob sites run (knobs_not_run)
            again = clone_value(self._seeded_call(wrapper, a1, k1), dev)  # a program may hand back the same block each call
        dev.synchronize()
        a3, k3 = self._fresh(shape, poison=False)
        dev.poison_pool(shape.result_blocks, pattern=1)
        third = self._seeded_call(wrapper, a3, k3)
        dev.synchronize()
        shape.unwritten = unwritten_masks(again, third, dev)
        # The original must reproduce itself, or no candidate can be checked against it. A race in the
        # original (TritonBench-G's apply_penalty with repeated token ids; attention kernels whose
        # programs overlap) makes a few elements differ call to call: up to UNSTABLE_SHARE of a value's
        # elements, a candidate may differ from the reference in twice as many elements as the original's
        # own calls did (shape.allow; widened across sizes by _pool_instability once every size is set up);
        # beyond that the original is not reproducible.
        self._measure_instability(shape, tolerances, [(again, a1, k1), (third, a3, k3)])
        del again, a1, k1, third, a3, k3  # before the next calls allocate theirs
        # A written argument is write-only when poisoning it first changes nothing the program produces.
        for path in sorted(shape.written):
            a2, k2 = self._fresh(shape, poison=False)
            for p, t in self._arg_tensors(a2, k2):
                if p == path:
                    dev.poison(t)
            r2 = self._seeded_call(wrapper, a2, k2)
            dev.synchronize()
            # Exact for an original that reproduces itself; for one with a race, within its tolerances and
            # allowance (a read of the poison still shows: a new NaN is never allowed).
            tol = tolerances if shape.allow else {}
            if self._first_difference(shape, (r2, a2, k2), tol, shape.allow)[0] is None:
                shape.write_only.add(path)
            del a2, k2, r2

    def _first_difference(self, shape: Shape, call: tuple, tolerances: dict, allow: dict) -> tuple:
        """(what differs, the argument's path or None) between a call's (result, args, kwargs) and the
        reference's result and arguments, or (None, None): every returned tensor outside the unwritten
        elements, then every tensor argument, each within its tolerance and ``allow``."""
        dev = self.device
        result, args, kwargs = call
        message = compare_values(result, shape.ref_result, dev, tolerances, ignore=shape.unwritten, allow=allow)
        if message is not None:
            return message, None
        for path, t in self._arg_tensors(args, kwargs):
            message = dev.compare(path, t, shape.ref_args[path], value_tolerance(t, dev, tolerances), None,
                                  allow.get(f"args[{path!r}]", 0))
            if message is not None:
                return message, path
        return None, None

    def _measure_instability(self, shape: Shape, tolerances: dict, calls: list) -> None:
        """Sets ``shape.allow`` from the original's further ``calls`` ((result, args, kwargs) on the same
        inputs), or raises the original's ``not reproducible`` failure when a value differs from the
        reference in more than UNSTABLE_SHARE of its elements (or in kind: shape, dtype, a non-tensor)."""
        dev = self.device
        worst: dict = {}
        for result, args, kwargs in calls:
            counts = mismatch_counts(result, shape.ref_result, dev, tolerances, shape.unwritten)
            counts.update(mismatch_counts(dict(self._arg_tensors(args, kwargs)), shape.ref_args, dev, tolerances,
                                          path="args"))
            for path, (n, total) in counts.items():
                worst[path] = (max(n, worst.get(path, (0, 0))[0]), total)
        # A value over the share gets no allowance, so its comparison below fails and names it.
        allow = {p: 2 * n for p, (n, total) in worst.items() if n <= UNSTABLE_SHARE * total}
        for call in calls:
            unstable, _ = self._first_difference(shape, call, tolerances, allow)
            if unstable is not None:
                raise VariantFailure("launch_failed", "the original program is not reproducible: two calls on "
                                     f"the same inputs differ ({unstable}), beyond what a race may change (up to "
                                     f"{UNSTABLE_SHARE:.0%} of a value's elements, none of them a new NaN); "
                                     "candidates cannot be checked against it")
        shape.allow = {p: n for p, n in allow.items() if n}
        shape.unstable = dict(worst)
        unstable_elements = sum(n for n, _ in worst.values())
        if unstable_elements:
            key = "setup.original_unstable_elements"
            self.setup_account[key] = self.setup_account.get(key, 0) + unstable_elements

    def import_variant(self, req: dict, knobs: list):
        """The program of req ({"program": path, "end_marker": str or None}) cut at its end marker, with
        `knobs` applied, imported as a fresh module. Raises VariantFailure with the trial status that
        fits (launch_failed: unreadable; invalid: a knob does not apply; compile_failed: it does not
        parse or import)."""
        try:
            with open(req["program"], encoding="utf-8") as f:
                source = cut_program(f.read(), req.get("end_marker"))
        except OSError as e:
            raise VariantFailure("launch_failed", f"cannot read the program: {e}")
        try:
            source = apply_knobs(source, knobs)
        except source_ops.SourceOpError as e:
            raise VariantFailure("invalid", f"cannot apply the configuration: {e}")
        except SyntaxError as e:
            raise VariantFailure("compile_failed", f"the program does not parse: {e}")
        try:
            return self.loader.load(source, os.path.basename(req["program"]), os.path.dirname(req["program"]))
        except Exception as e:
            raise VariantFailure("compile_failed", "the variant does not import:\n" + _failure_text(e))

    def _bind(self, req: dict, module):
        """The callable of a program module: the adapter's function(module), else module.<call>."""
        adapter = req.get("adapter")
        if not adapter:
            wrapper = getattr(module, req["call"], None)
            if wrapper is None:
                raise VariantFailure("compile_failed", f"the program has no function {req['call']!r}")
            return wrapper
        try:
            with open(adapter["file"], encoding="utf-8") as f:
                helper = self.loader.load(f.read(), os.path.basename(adapter["file"]),
                                          os.path.dirname(adapter["file"]))
            return getattr(helper, adapter["function"])(module)
        except Exception as e:
            raise VariantFailure("launch_failed", "the adapter failed:\n" + _failure_text(e))

    def _seeded_call(self, wrapper, args: list, kwargs: dict):
        """A call whose result is compared: Python's, numpy's and torch's generators seeded first (the
        problem's seed + 1), so a program that draws numbers of its own (TritonBench-G's
        batched_vecmat_mult makes its matrices with torch.randn inside the wrapper) draws the same ones in
        the original's and every candidate's calls."""
        self.device.seed(self.call_seed)
        return wrapper(*args, **kwargs)

    def _call_checked(self, wrapper, shape: Shape, index: int, tolerances: dict) -> None:
        dev = self.device
        tolerances = call_tolerances(tolerances, shape.input_dtypes)
        args, kwargs = self._fresh(shape, poison=True)
        dev.poison_pool(shape.result_blocks)
        result = self._seeded_call(wrapper, args, kwargs)
        dev.synchronize()
        tag = f"shape {index}: "
        message, argument = self._first_difference(shape, (result, args, kwargs), tolerances, shape.allow)
        if argument is not None and argument not in shape.written:
            message += " (an argument the original program does not write)"
        if message is not None:
            raise VariantFailure("wrong_result", tag + message)

    def evaluate(self, req: dict) -> dict:
        for field in ("program", "call", "inputs"):
            if field not in req:
                raise BadRequest(f"missing field {field!r}")
        req.setdefault("seed", 0)
        knobs = req.get("knobs", [])
        for k in knobs:
            if not isinstance(k, dict) or "kind" not in k or "target" not in k or "value" not in k:
                raise BadRequest(f"a knob is {{kind, target, value, site|kernel}}: {k!r}")
            if k["kind"] not in KNOB_KINDS:
                raise BadRequest(f"knob kind {k['kind']!r} (expected one of {', '.join(KNOB_KINDS)})")
        timing = {**DEFAULT_TIMING, **req.get("timing", {})}
        tolerances = dict(DEFAULT_TOLERANCES)
        for name, t in req.get("tolerances", {}).items():
            tolerances[name] = (float(t.get("rel", 0.0)), float(t.get("abs", 0.0)))
        out = {"id": req.get("id"), "status": "ok", "error": "", "times_ms": [], "metrics": {},
               "compile_s": 0.0, "check_s": 0.0, "benchmark_s": 0.0, "profile_s": 0.0, "fatal": False,
               "notes": ""}
        stage = "setup"
        held = contextlib.ExitStack()  # the exclusive lock, from timing to the answer
        try:
            with self.lock.hold(exclusive=False):
                if req.get("profile", False):
                    self._start_profiler()
                self._setup(req, tolerances)
                if req.get("profile", False):
                    self._profiler_started()
            out["metrics"].update(self.setup_account)
            self.setup_account = {}
            n = len(self.shapes)
            timed = []
            for t in req.get("time_shapes", [-1]):
                if not isinstance(t, int) or not -n <= t < n:
                    raise VariantFailure("invalid", f"time shape {t!r}: the inputs give {n} shapes")
                timed.append(t % n)
            stage = "import"
            t0 = time.perf_counter()
            module = self.import_variant(req, knobs)
            wrapper = self._bind(req, module)
            stage = "check"
            for i, shape in enumerate(self.shapes):  # the first call compiles (Triton's JIT): not locked
                t1 = time.perf_counter()
                try:  # the candidate's compiles are bounded (a size may compile kernels of its own)
                    bounded_compile.limit(req.get("compile_timeout_s"))
                    with self.lock.hold(exclusive=False) if i > 0 else contextlib.nullcontext():
                        self._call_checked(wrapper, shape, i, tolerances)
                finally:
                    bounded_compile.limit(None)
                    if i == 0:
                        out["compile_s"] = time.perf_counter() - t0
                    else:
                        out["check_s"] += time.perf_counter() - t1
            stage = "timing"
            held.enter_context(self.lock.hold(exclusive=True))  # timing and profiling: the GPU alone
            t2 = time.perf_counter()
            for j, si in enumerate(timed):
                samples = self._time(wrapper, self.shapes[si], timing)
                tag = f".shape{si}"
                out["metrics"]["time.median_ms" + tag] = median(samples)
                out["metrics"]["time.repeats" + tag] = len(samples)
                if j == 0:
                    out["times_ms"] = samples
            out["benchmark_s"] = time.perf_counter() - t2
            if req.get("profile", False):
                stage = "profile"
                t3 = time.perf_counter()
                si = timed[0]
                try:
                    self._profile(wrapper, self.shapes[si], int(req.get("profile_calls", 5)), timing,
                                  out["metrics"], f".shape{si}")
                except Exception as e:
                    if _is_device_error(e) or not self.device.healthy():
                        raise
                    out["notes"] = f"kernel activity unavailable: {type(e).__name__}: {e}"
                if req.get("metrics"):
                    try:
                        out["metrics"].update(self._metrics(wrapper, self.shapes[si], req["metrics"], timing))
                    except Exception as e:
                        if _is_device_error(e) or not self.device.healthy():
                            raise
                        out["notes"] += f"{'; ' if out['notes'] else ''}metrics unavailable: {type(e).__name__}: {e}"
                out["profile_s"] = time.perf_counter() - t3
        except VariantFailure as e:
            out.update(status=e.status, error=e.message, fatal=e.fatal, times_ms=[])
            if stage == "setup":  # the inputs or the original failed: every variant would fail so
                out["original_failed"] = True
        except BadRequest:
            raise
        except Exception as e:
            broken = _is_device_error(e) or not self.device.healthy()
            if broken:
                out.update(status="crashed", fatal=True, error=f"during {stage}: " + _failure_text(e))
            elif _is_compile_timeout(e):
                out.update(status="timeout", error=f"during {stage}: " + _failure_text(e))
            elif _is_compile_error(e):
                out.update(status="compile_failed", error=_failure_text(e))
            else:
                out.update(status="launch_failed", error=f"during {stage}: " + _failure_text(e))
            out["times_ms"] = []
        finally:
            held.close()
        return out

    def _time(self, wrapper, shape: Shape, timing: dict) -> list[float]:
        dev = self.device
        args, kwargs = self._fresh(shape, poison=False)
        # Arguments the program reads and writes are restored before each call (outside the events).
        restore = self._restore_pairs(shape, args, kwargs)

        def prepare():
            for t, pristine in restore:
                dev.copy_into(t, pristine)

        def call():
            wrapper(*args, **kwargs)

        if timing["warmup"] > 0:
            dev.time_calls(call, prepare, timing["warmup"], False)
        return adaptive_samples(lambda k: dev.time_calls(call, prepare, k, timing["flush_l2"]), timing)

    def _metrics(self, wrapper, shape: Shape, names: list, timing: dict) -> dict:
        args, kwargs = self._fresh(shape, poison=False)
        restore = self._restore_pairs(shape, args, kwargs)

        def prepare():
            for t, pristine in restore:
                self.device.copy_into(t, pristine)

        return self.device.kernel_metrics(lambda: wrapper(*args, **kwargs), prepare, [str(n) for n in names],
                                          timing["flush_l2"])

    def _restore_pairs(self, shape: Shape, args: list, kwargs: dict) -> list:
        """(argument, its pristine value) of the arguments the program reads and writes."""
        return [(t, pristine) for (path, t), (_, pristine) in
                zip(self._arg_tensors(args, kwargs), self._arg_tensors(shape.args, shape.kwargs))
                if path in shape.written and path not in shape.write_only]

    def _profile(self, wrapper, shape: Shape, calls: int, timing: dict, metrics: dict, tag: str) -> None:
        dev = self.device
        args, kwargs = self._fresh(shape, poison=False)
        restore = self._restore_pairs(shape, args, kwargs)

        def prepare():
            for t, pristine in restore:
                dev.copy_into(t, pristine)

        per_call = dev.kernel_activity(lambda: wrapper(*args, **kwargs), prepare, calls, timing["flush_l2"])
        s = summarize_kernels(per_call)
        metrics["time.kernels_ms" + tag] = s["kernels_ms"]
        metrics["kernels.count" + tag] = s["count"]
        med = metrics.get("time.median_ms" + tag)
        if med is not None and not math.isnan(s["kernels_ms"]):
            metrics["time.overhead_ms" + tag] = med - s["kernels_ms"]
        print(f"program_worker[{os.getpid()}]: kernels{tag}: {', '.join(s['names'])}", file=sys.stderr)


def _mtime(path: str):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


# --- the loop -----------------------------------------------------------------------------------------

def serve(worker: Worker, lines, out) -> int:
    def handle(op, request: dict) -> dict:
        if op == "hello":
            return worker.hello()
        if op == "evaluate":
            return worker.evaluate(request)
        raise BadRequest(f"unknown op {op!r} (hello, evaluate, exit)")

    def failure(request, message: str, internal: bool) -> dict:
        # An internal error may have left the worker's state wrong: fatal, the runner starts another.
        return {"id": request_id(request), "status": "crashed", "error": message, "fatal": internal}

    return line_protocol.serve(lines, out, handle, failure)


@contextlib.contextmanager
def traced_lines(filename: str | None, lines: set[int]):
    """Adds to ``lines`` the numbers of the lines of ``filename`` that run inside the block (this thread's
    Python frames of that file; the others are not traced). Nothing where ``filename`` is None."""
    if filename is None:
        yield
        return

    def local(frame, event, arg):
        if event == "line":
            lines.add(frame.f_lineno)
        return local

    def calls(frame, event, arg):
        if frame.f_code.co_filename != filename:
            return None
        lines.add(frame.f_lineno)
        return local

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        yield
    finally:
        sys.settrace(previous)


def knobs_not_run(filename: str, knobs: list[dict], lines: set[int]) -> dict[str, float]:
    """Setup metrics from the lines of the original (``filename``) that ran in its reference calls
    (``traced_lines``): ``setup.knob_sites`` (the launch and literal knobs of ``knobs``, a request's, by
    site and target), ``setup.knobs_not_run`` (how many of them did not take effect, because their launch
    or assignment never ran at the search's sizes: a branch, a backward, a wrapper nothing calls) and one
    ``setup.knob_not_run.<target>@<site>`` = 1 each. A parameter's default counts as run where its
    function's body ran. Autotune and heuristic knobs are not judged (their kernel's launches are)."""
    try:
        with open(filename, encoding="utf-8") as f:
            module = source_ops.Module(f.read())
    except (OSError, source_ops.SourceOpError):
        return {}
    sites = {(k["site"], k["target"], k["kind"]) for k in knobs
             if k.get("kind") in ("launch", "literal") and isinstance(k.get("site"), str)}
    metrics: dict[str, float] = {"setup.knob_sites": float(len(sites)), "setup.knobs_not_run": 0.0}
    for site, target, kind in sorted(sites):
        function, _, line = site.rpartition(":")
        if function == "<module>" or not line.isdigit():
            continue
        if kind == "launch":
            try:
                call = module.launch_at(site).call
            except source_ops.SourceOpError:
                continue
            ran = any(call.lineno <= n <= call.end_lineno for n in lines)
        else:
            scope = module.scopes.get(function)
            body = getattr(scope, "body", None)
            if not body:
                continue
            header = range(scope.lineno, body[0].lineno)  # a parameter's default sits in the def's lines
            ran = int(line) in lines or (int(line) in header and
                                         any(body[0].lineno <= n <= scope.end_lineno for n in lines))
        if not ran:
            metrics["setup.knobs_not_run"] += 1
            metrics[f"setup.knob_not_run.{target}@{site}"] = 1.0
    return metrics


def knobs_as_parameters(source: str, passed: dict[str, set[str]] | None = None,
                        reached: set[str] | None = None) -> list[dict]:
    """find_knobs' knobs as a problem's parameters (one per knob that can be tuned). A heuristic's flag that
    states a fact about the call's arguments (``IS_EVEN_M``: ``args["N_CTX"] % args["BLOCK_M"] == 0``) is
    not one: pinned to the fact it is what the heuristic gives, against it slower (False) or wrong
    (True); TritonBench-G's attention_score spent its searches on such pins (2026-12-07).

    A parameter's ``default`` is the knob's ``current`` (the value the source writes; for a launch option
    the source computes, ``source_ops.AS_WRITTEN``, which leaves its expression in place) or, for a
    ``num_warps``/``num_stages`` the launch does not write, its ``implied`` (Triton's default), where that
    value is among the suggested ones: the problem's default configuration is the original's launch
    wherever no autotune or heuristic knob decides it (every such TritonBench-G operator, 2026-12-08). A
    parameter without a default starts at its first value.

    ``passed``: the arguments the program's callers pass, by function (``{"wrapper": {"BLOCK"}}``, the
    qualified names of find_knobs' sites): a parameter's default there is no knob (it never holds; a
    launch option written as that parameter's name then has its own, as written).
    ``reached``: the functions that run (source_ops.reachable_functions); a knob elsewhere (an autograd
    ``backward`` the caller never runs) is none (source_ops.reached_knobs)."""
    params, seen = [], set()
    knobs = source_ops.find_knobs(source, passed)
    if reached is not None:
        knobs = source_ops.reached_knobs(source, knobs, reached)
    for k in knobs:
        if k.get("error") or not k["suggested"] or k["name"] is None or k.get("argument_fact"):
            continue
        if k["kind"] in ("autotune", "heuristic"):
            knob = {k["kind"]: k["kernel"]}
        elif k["kind"] == "literal":
            knob = {"literal": k["site"]}
        else:
            knob = {"launch": k["site"]}
        name = k["name"]
        while name in seen:
            name += "_"
        seen.add(name)
        p = {"name": name, "values": k["suggested"], "knob": knob}
        if name != k["name"]:
            p["knob"]["target"] = k["name"]
        for value in (k["current"], k.get("implied")):
            if value is not None and value in k["suggested"]:
                p["default"] = value
                break
        params.append(p)
    return params


def start_is_original(parameters: list[dict]) -> bool:
    """Whether the default configuration of ``parameters`` (knobs_as_parameters') is what the original
    program runs: every parameter has a default (a literal the source writes, or the launch option Triton
    implies) and none is an autotune or heuristic knob (the original chooses those itself, per call)."""
    return all("default" in p and not ({"autotune", "heuristic"} & set(p["knob"])) for p in parameters)


# At most this many start configurations (the default included): a 30 s TritonBench-G search with four
# workers finishes from 6 to a few hundred trials (2026-12-07), and an autotune list can hold hundreds.
START_LIMIT = 8


def start_configurations(source: str, parameters: list[dict], limit: int = START_LIMIT) -> list:
    """A problem's ``start:`` for ``parameters`` (knobs_as_parameters' of ``source``): ``"default"``, the
    original's own configuration, then the other entries of the source's ``@triton.autotune`` lists, in
    list order (round robin over the autotuned kernels), each with every other parameter at its default,
    without repeats, at most ``limit`` in all. An autotuned original tries its whole list at every size
    and keeps the fastest; kforge's search keeps one configuration, so it starts from the expert's
    candidates rather than from the list's first entry only (bmm_optimized, 2026-12-07: 0.36x of its
    autotuner after a 30 s search that started from the first entry)."""
    default = {p["name"]: p.get("default", p["values"][0]) for p in parameters}
    by_kernel: dict[str, list[dict]] = {}
    for p in parameters:
        if "autotune" in p["knob"]:
            by_kernel.setdefault(p["knob"]["autotune"], []).append(p)
    entries = [[{**default, **{p["name"]: c[p["knob"].get("target", p["name"])] for p in params}}
                for c in source_ops.autotune_configs(source, kernel)]
               for kernel, params in by_kernel.items()]
    out, seen = ["default"], [default]
    for round_ in itertools.zip_longest(*entries):
        for mapping in round_:
            if len(out) >= limit:
                return out
            if mapping is None or mapping in seen:
                continue
            if all(mapping[p["name"]] in p["values"] for p in parameters):
                out.append(mapping)
                seen.append(mapping)
    return out


def visible_gpus() -> int:
    """The GPUs a worker would see (CUDA_VISIBLE_DEVICES applies), 0 without torch. Asks the driver
    (libcuda's cuDeviceGetCount, ~0.1 s) rather than importing torch (seconds, and the count runs before
    every program evaluator starts, inside a wall budget that includes setup); torch only where the
    driver library cannot be loaded."""
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        return 0
    try:
        import ctypes
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    except OSError:
        pass
    try:
        import torch
        return torch.cuda.device_count()
    except Exception:
        return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--cache", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "kforge-programs"))
    ap.add_argument("--fake", action="store_true", help="numpy on the host instead of torch on a GPU")
    ap.add_argument("--count", action="store_true", help="print the number of visible GPUs and exit")
    ap.add_argument("--knobs", metavar="FILE", help="print the program's knobs as parameters (JSON) and exit")
    ap.add_argument("--end-marker", default=None)
    a = ap.parse_args(argv)
    if a.knobs:
        with open(a.knobs, encoding="utf-8") as f:
            print(json.dumps(knobs_as_parameters(cut_program(f.read(), a.end_marker)), indent=1))
        return 0
    if a.count:
        if a.fake:
            print(1)
            return 0
        print(visible_gpus())
        return 0
    out = line_protocol.claim_stdout()
    os.makedirs(a.cache, exist_ok=True)
    if not a.fake:
        bounded_compile.install()  # before any kernel binds Triton's compile
    try:
        device = program_devices.make_device("fake" if a.fake else "torch", a.device)
    except Exception as e:
        first = sys.stdin.readline()
        if first.strip():
            out.write(json.dumps({"error": f"no device: {type(e).__name__}: {e}"}) + "\n")
            out.flush()
        return 1
    return serve(Worker(device, a.cache), iter(sys.stdin.readline, ""), out)


if __name__ == "__main__":
    sys.exit(main())
