"""The device layer of kforge's program worker (``program_worker``): everything that touches tensors or a GPU.

Two implementations of one small interface:

- ``TorchDevice``: the real one (torch on a CUDA GPU): CUDA events, an L2 flush buffer, NaN poisoning,
  comparisons on the device, kernels' own durations from CUPTI activity records (through
  ``torch.profiler``, i.e. Kineto, which reads CUPTI's activity API: the records of the kernels a call
  launched, with their GPU start and end); CUPTI metrics from kforge's own range profiler
  (``cupti_metrics``, libkforge_cupti.so).
- ``FakeDevice``: numpy arrays on the host, a wall clock for a timer, no GPU. It lets the worker's protocol,
  comparison, poisoning and statistics be tested without a GPU; programs written for it use ``fake_empty``
  (a caching allocator that hands the same block back, as torch's does) and ``fake_kernel`` (a simulated
  kernel record).

The worker never imports torch itself: only ``TorchDevice`` does, when it is made.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

# kforge's dtype names (docs/kernel.md) by the tensor library's.
DTYPE_NAMES = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
    "int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16", "int32": "i32", "uint32": "u32",
    "int64": "i64", "uint64": "u64", "bool": "bool",
}


class DeviceBroken(Exception):
    """The device's state is lost (a fault, a sticky CUDA error): the worker must exit."""


def _describe_mismatch(path: str, n_bad: int, total: int, index, out_value, ref_value, tol, allow: int = 0) -> str:
    allowed = f"; {allow} allowed, as the original differs from itself" if allow else ""
    return (f"{path}: {n_bad} of {total} elements differ; first at {index}: {out_value!r} vs reference "
            f"{ref_value!r} (tolerance abs {tol[1]:g} + rel {tol[0]:g} |ref|{allowed})")


def _shape_mismatch(path: str, out, ref) -> str | None:
    if tuple(out.shape) != tuple(ref.shape):
        return f"{path}: shape {tuple(out.shape)} vs reference {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return f"{path}: dtype {out.dtype} vs reference {ref.dtype}"
    return None


def _poison_value(floating: bool, boolean: bool, signed: bool, int_max: Callable[[], int], pattern: int):
    """What poison ``pattern`` writes: pattern 0 (every check) NaN / True / -1 / the unsigned maximum;
    pattern 1 (only to find unwritten elements) 4096.0 (exact in every float type) / False / 77."""
    if pattern == 0:
        return math.nan if floating else True if boolean else -1 if signed else int_max()
    return 4096.0 if floating else False if boolean else 77


COMPARE_BLOCK = 1 << 24  # elements compared at once (float64 temporaries of 128 MiB each)


class _Comparison:
    """The comparison of a result with the reference, once for both devices; a device gives the array
    module ``_xp`` and the primitives below (numpy and torch name isnan, isinf and abs alike)."""

    def compare(self, path: str, out, ref, tol, ignore=None, allow: int = 0) -> str | None:
        """None when ``out`` matches ``ref`` within ``tol`` (rel, abs) outside the ``ignore`` mask, or
        differs in at most ``allow`` elements none of which is a new NaN; else what differs."""
        if (m := _shape_mismatch(path, out, ref)) is not None:
            return m
        with self._quiet():
            bad = self._bad(out, ref, tol, ignore)
            n_bad = self._count(bad)
            new_nan = self._new_nan(out, ref, ignore) if allow and n_bad <= allow else None
            n_nan = self._count(new_nan) if new_nan is not None else 0
            if n_bad <= allow and not n_nan:
                return None
            # Within the count but with a new NaN: say so (the first difference may be a raced value).
            index = self._first(new_nan if n_nan else bad)
            why = f"; {n_nan} of them NaN where the reference has a number, which no allowance covers" if n_nan else ""
            return _describe_mismatch(path, n_bad, math.prod(self.shape_of(ref)), index, out[index].item(),
                                      ref[index].item(), tol, allow) + why

    def mismatches(self, out, ref, tol, ignore=None) -> int | None:
        """How many elements differ beyond ``tol`` (None: shape or dtype differ)."""
        if _shape_mismatch("", out, ref) is not None:
            return None
        with self._quiet():
            return self._count(self._bad(out, ref, tol, ignore))

    def _bad(self, out, ref, tol, ignore):
        """The mask of elements that differ. A large tensor is compared in blocks of COMPARE_BLOCK
        elements: the comparison widens to float64 and makes several temporaries, 40 bytes an element at
        once, which for TritonBench-G's largest inputs (dropout_triton, cross_entropy1: 1-4 GiB tensors)
        ran a worker out of GPU memory while the inputs themselves fit; in blocks the temporaries are a
        few hundred MiB whatever the size, and the mask (a byte an element) is the only full-size one."""
        n = math.prod(self.shape_of(ref))
        if n <= COMPARE_BLOCK:
            return self._bad_block(out, ref, tol, ignore)
        o, r = out.reshape(-1), ref.reshape(-1)
        g = ignore.reshape(-1) if ignore is not None else None
        bad = self._xp.zeros_like(r, dtype=self._bool)
        for start in range(0, n, COMPARE_BLOCK):
            block = slice(start, start + COMPARE_BLOCK)
            bad[block] = self._bad_block(o[block], r[block], tol, g[block] if g is not None else None)
        return bad.reshape(self.shape_of(ref))

    def _bad_block(self, out, ref, tol, ignore):
        xp = self._xp
        if self.is_floating(ref):
            o, r = self._f64(out), self._f64(ref)
            ok = abs(o - r) <= tol[1] + tol[0] * abs(r)
            ok |= (xp.isnan(o) & xp.isnan(r)) | ((o == r) & xp.isinf(r))
        else:
            ok = out == ref
        if ignore is not None:
            ok |= ignore
        return ~ok

    def _new_nan(self, out, ref, ignore):
        """Elements NaN in ``out`` and not in ``ref`` (e.g. left as the poison): never covered by an
        allowance, which is for values a race changes, not for elements a candidate fails to write."""
        xp = self._xp
        if not self.is_floating(ref):
            return xp.zeros_like(out, dtype=self._bool)
        new = xp.isnan(out) & ~xp.isnan(ref)
        return new & ~ignore if ignore is not None else new


class FakeDevice(_Comparison):
    """numpy on the host. ``name`` 'fake'. Timing is the wall clock of the call."""

    name = "fake"
    kernel_records: list | None = None  # collecting fake_kernel() records while not None
    broken = False
    pool: dict = {}  # (shape, dtype) -> the block fake_empty hands out

    def __init__(self, device: int = 0):
        import numpy
        self.np = numpy
        self.index = device
        FakeDevice.broken = False

    # -- description
    def describe(self) -> dict:
        return {"device": self.index, "name": "fake device", "cc_major": 9, "cc_minor": 0, "sm_count": 1,
                "memory_bytes": 1 << 30, "l2_bytes": 1 << 20, "flush_bytes": flush_bytes(1 << 20),
                "profiling": True, "profiling_note": "", "torch": None}

    # -- tensors
    def is_tensor(self, x) -> bool:
        return isinstance(x, self.np.ndarray)

    def clone(self, x):
        return x.copy()

    def copy_into(self, dst, src) -> None:
        dst[...] = src

    def dtype_name(self, x) -> str:
        return DTYPE_NAMES.get(str(x.dtype), str(x.dtype))

    def shape_of(self, x) -> tuple:
        return tuple(x.shape)

    def is_floating(self, x) -> bool:
        return x.dtype.kind in "fc"

    def poison(self, x, pattern: int = 0) -> None:
        x.fill(_poison_value(self.is_floating(x), x.dtype.kind == "b", x.dtype.kind == "i",
                             lambda: self.np.iinfo(x.dtype).max, pattern))

    def poison_pool(self, blocks: list, pattern: int = 0) -> None:
        """Fills the allocator's cached blocks of these (shape, dtype) with the poison ``pattern``."""
        for shape, dtype in blocks:
            block = FakeDevice.pool.get((tuple(shape), dtype))
            if block is not None:
                self.poison(block, pattern)

    def unwritten(self, first, second):
        """The mask of elements that read back as poison pattern 0 in ``first`` and 1 in ``second``
        (None: none, or the results do not match in shape)."""
        if first.shape != second.shape or first.dtype != second.dtype:
            return None
        mask = self._is_poison(first, 0) & self._is_poison(second, 1)
        return mask if mask.any() else None

    def _is_poison(self, x, pattern: int):
        if self.is_floating(x) and pattern == 0:
            return self.np.isnan(x)
        return x == _poison_value(self.is_floating(x), x.dtype.kind == "b", x.dtype.kind == "i",
                                  lambda: self.np.iinfo(x.dtype).max, pattern)

    def equal(self, a, b) -> bool:
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            self.np.array_equal(a, b, equal_nan=self.is_floating(a)))

    # _Comparison's primitives
    @property
    def _xp(self):
        return self.np

    _bool = bool

    def _f64(self, x):
        return x.astype(self.np.float64)

    def _count(self, mask) -> int:
        return int(mask.sum())

    def _first(self, mask) -> tuple:
        return tuple(int(i) for i in self.np.argwhere(mask)[0])

    def _quiet(self):
        return self.np.errstate(invalid="ignore", over="ignore")

    # -- running
    def inputs_context(self):
        import contextlib
        return contextlib.nullcontext()

    def to_host(self, x):
        """``x`` in host memory (the fake device's tensors are there already)."""
        return x

    def on_device(self, x) -> bool:
        return True

    def seed(self, seed: int) -> None:
        import random
        random.seed(seed)
        self.np.random.seed(seed % (1 << 32))

    def synchronize(self) -> None:
        if FakeDevice.broken:
            raise DeviceBroken("fake device fault")

    def release_cached_memory(self) -> None:
        """Counted only: the fake pool stands for blocks a program's next allocation gets back."""
        self.releases = getattr(self, "releases", 0) + 1

    def memory_account(self) -> dict:
        return {}

    def healthy(self) -> bool:
        return not FakeDevice.broken

    def flush_l2(self) -> None:
        pass

    def time_calls(self, call: Callable[[], Any], prepare: Callable[[], None], count: int,
                   flush: bool) -> list[float]:
        """Milliseconds of `count` calls, each after prepare() and an L2 flush."""
        times = []
        for _ in range(count):
            prepare()
            if flush:
                self.flush_l2()
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1e3)
        self.synchronize()
        return times

    def kernel_activity(self, call: Callable[[], Any], prepare: Callable[[], None], count: int,
                        flush: bool) -> list[list[tuple[str, float]]]:
        """Per call, the (name, milliseconds) of each kernel it launched."""
        per_call = []
        for _ in range(count):
            prepare()
            FakeDevice.kernel_records = []
            try:
                call()
                self.synchronize()
                per_call.append(list(FakeDevice.kernel_records))
            finally:
                FakeDevice.kernel_records = None
        return per_call


    def kernel_metrics(self, call: Callable[[], Any], prepare: Callable[[], None], names: list[str],
                       flush: bool) -> dict:
        """Each metric summed over the kernels of one call. Fake: the number of kernels the call launched."""
        per_call = self.kernel_activity(call, prepare, 1, flush)
        return {name: float(len(per_call[0])) for name in names}


def fake_empty(shape, dtype="float32"):
    """For fake programs: an uninitialised array from a caching allocator that returns the same block for
    the same request (as torch's does after a free), so a program that does not write its output returns
    stale data unless the worker poisons the pool."""
    import numpy
    key = (tuple(shape), str(numpy.dtype(dtype)))
    if key not in FakeDevice.pool:
        FakeDevice.pool[key] = numpy.zeros(shape, dtype=dtype)
    return FakeDevice.pool[key]


def fake_kernel(name: str, ms: float) -> None:
    """For fake programs: a kernel of `name` that ran `ms` milliseconds (a simulated activity record)."""
    records = FakeDevice.kernel_records  # read once: a profiler's start in another thread may reset it
    if records is not None:
        records.append((name, ms))


def fake_break_device() -> None:
    """For fake programs: the device faults (a sticky error): the worker answers crashed and exits."""
    FakeDevice.broken = True


class _FakeJit:
    """For fake programs: ``@triton.jit`` of ``fake_triton``. ``kernel[grid](*args, num_warps=.., num_stages=..,
    **constexprs)`` records a kernel of 1 us per warp (``fake_kernel``) and calls the Python function."""

    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        def launch(*args, num_warps=4, num_stages=3, **constexprs):
            fake_kernel(self.fn.__name__, 0.001 * num_warps)
            return self.fn(*args, **constexprs)
        return launch


class fake_triton:  # noqa: N801 - stands where a program writes `triton`
    """For fake programs: ``import``-free stand-ins named as Triton's, so that kforge's source operators see
    ``@triton.jit`` kernels and ``tl.constexpr`` parameters: ``from ... import fake_triton as triton``."""
    jit = _FakeJit


class fake_tl:  # noqa: N801 - stands where a program writes `tl`
    constexpr = int


# triton.testing.do_bench's L2 flush (Triton 3.6: get_empty_cache_for_benchmark, zeroed before each call).
DO_BENCH_FLUSH_BYTES = 256 << 20


def flush_bytes(l2_bytes: int) -> int:
    """The L2 flush's buffer: twice the L2, and at least do_bench's 256 MiB. Its rewrite keeps the GPU busy
    (about 85 us on an H100) while the host launches the timed call, so a short call's Python launch is
    hidden as in do_bench, the final measurement's timer. With twice the L2 only (100 MiB on an H100, about
    35 us), the search's times of operators whose kernels take 5-10 us were 4-9x do_bench's (launch time
    under the compiling workers' load: apply_penalty, l2_norm_bwd, l2_norm_triton1/2 in TritonBench-G);
    0.94-1.09x on the 46 others with both times (docs/tritonbench-g.md, 2026-12-07, seventh session)."""
    return max(2 * l2_bytes, DO_BENCH_FLUSH_BYTES)


class TorchDevice(_Comparison):
    """torch on CUDA device `device`."""

    name = "cuda"

    def __init__(self, device: int = 0):
        import torch
        self.torch = torch
        self.index = device
        torch.cuda.set_device(device)
        self.dev = torch.device("cuda", device)
        self.props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(self.props, "L2_cache_size", 0) or (50 << 20))
        self.l2_bytes = l2
        self.flush_buffer = torch.empty(flush_bytes(l2), dtype=torch.int8, device=self.dev)
        self._profiling_note = ""
        self._cupti = None  # the range profiler (cupti_metrics.CuptiProfiler), made on first use
        try:
            import torch.profiler  # noqa: F401
            self._profiling = True
        except Exception as e:  # pragma: no cover - depends on the build of torch
            self._profiling = False
            self._profiling_note = f"torch.profiler unavailable: {e}"

    def describe(self) -> dict:
        p = self.props
        return {"device": self.index, "name": p.name, "cc_major": p.major, "cc_minor": p.minor,
                "sm_count": p.multi_processor_count, "memory_bytes": int(p.total_memory),
                "l2_bytes": self.l2_bytes,
                "flush_bytes": self.flush_buffer.numel() * self.flush_buffer.element_size(),
                "profiling": self._profiling,
                "profiling_note": self._profiling_note, "torch": self.torch.__version__,
                "cuda": self.torch.version.cuda, "pci_bus_id": self._pci_bus_id()}

    def _pci_bus_id(self) -> str | None:
        """As the driver spells it (cuDeviceGetPCIBusId), for the device lock kforge-worker shares."""
        p = self.props
        if not hasattr(p, "pci_bus_id"):
            return None
        return f"{getattr(p, 'pci_domain_id', 0):04x}:{p.pci_bus_id:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"

    # -- tensors
    def is_tensor(self, x) -> bool:
        return isinstance(x, self.torch.Tensor)

    def clone(self, x):
        return x.detach().clone()

    def copy_into(self, dst, src) -> None:
        with self.torch.no_grad():
            dst.copy_(src)

    def dtype_name(self, x) -> str:
        return DTYPE_NAMES.get(str(x.dtype).replace("torch.", ""), str(x.dtype))

    def shape_of(self, x) -> tuple:
        return tuple(x.shape)

    def is_floating(self, x) -> bool:
        return x.is_floating_point() or x.is_complex()

    def poison(self, x, pattern: int = 0) -> None:
        with self.torch.no_grad():
            x.fill_(_poison_value(self.is_floating(x), x.dtype == self.torch.bool, x.dtype.is_signed,
                                  lambda: self.torch.iinfo(x.dtype).max, pattern))

    def poison_pool(self, blocks: list, pattern: int = 0) -> None:
        """Allocates blocks of these (shape, dtype), fills them with the poison ``pattern`` and frees them:
        torch's caching allocator hands the same memory to the program's next torch.empty of that size, so
        an element the candidate does not write reads poison instead of the reference's stale result."""
        held = []
        for shape, dtype in blocks:
            t = self.torch.empty(shape, dtype=getattr(self.torch, dtype), device=self.dev)
            self.poison(t, pattern)
            held.append(t)
        del held

    def unwritten(self, first, second):
        """The mask of elements that read back as poison pattern 0 in ``first`` and 1 in ``second``
        (None: none, or the results do not match in shape)."""
        if tuple(first.shape) != tuple(second.shape) or first.dtype != second.dtype:
            return None
        with self.torch.no_grad():
            mask = self._is_poison(first, 0) & self._is_poison(second, 1)
            return mask if bool(mask.any().item()) else None

    def _is_poison(self, x, pattern: int):
        if self.is_floating(x) and pattern == 0:
            return self.torch.isnan(x)
        return x == _poison_value(self.is_floating(x), x.dtype == self.torch.bool, x.dtype.is_signed,
                                  lambda: self.torch.iinfo(x.dtype).max, pattern)

    def equal(self, a, b) -> bool:
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(self.torch.equal(a, b)) or (self.is_floating(a) and bool(
            self.torch.equal(self.torch.nan_to_num(a, nan=0.5), self.torch.nan_to_num(b, nan=0.5))
            and self.torch.equal(self.torch.isnan(a), self.torch.isnan(b))))

    # _Comparison's primitives
    @property
    def _xp(self):
        return self.torch

    @property
    def _bool(self):
        return self.torch.bool

    def _f64(self, x):
        return x.double()

    def _count(self, mask) -> int:
        return int(mask.sum().item())

    def _first(self, mask) -> tuple:
        return tuple(int(i) for i in mask.nonzero()[0].tolist())

    def _quiet(self):
        return self.torch.no_grad()

    # -- running
    def inputs_context(self):
        """Where the inputs function runs: tensors made without a device land on this GPU. Only there: a
        default device set for the whole process would intercept every torch call of the timed wrapper."""
        return self.dev

    def to_host(self, x):
        """``x`` in host memory (a copy where it is on the GPU), a leaf as ``x`` was: detached, so that no
        autograd record of the copy keeps the GPU's tensor alive, with ``x``'s requires_grad."""
        with self.torch.no_grad():
            return x.detach().cpu().requires_grad_(x.requires_grad)

    def on_device(self, x) -> bool:
        """Whether tensor ``x`` is on this GPU."""
        return x.device == self.dev

    def seed(self, seed: int) -> None:
        import random
        random.seed(seed)
        self.torch.manual_seed(seed)
        try:
            import numpy
            numpy.random.seed(seed % (1 << 32))
        except ImportError:
            pass

    def synchronize(self) -> None:
        try:
            self.torch.cuda.synchronize(self.dev)
        except Exception as e:
            raise DeviceBroken(f"{type(e).__name__}: {e}") from e

    def release_cached_memory(self) -> None:
        """Hands the caching allocator's unused blocks back to the GPU (for the other processes on it)."""
        import gc
        gc.collect()
        self.torch.cuda.empty_cache()

    def memory_account(self) -> dict:
        """GiB this process's allocator holds now and held at most (reserved: what other processes on the
        GPU cannot have)."""
        cuda = self.torch.cuda
        return {"setup.gpu_reserved_gib": cuda.memory_reserved(self.dev) / 2**30,
                "setup.gpu_reserved_peak_gib": cuda.max_memory_reserved(self.dev) / 2**30}

    def healthy(self) -> bool:
        try:
            self.torch.cuda.synchronize(self.dev)
            self.torch.zeros(1, device=self.dev).add_(1).item()
            return True
        except Exception:
            return False

    def flush_l2(self) -> None:
        self.flush_buffer.zero_()

    def time_calls(self, call: Callable[[], Any], prepare: Callable[[], None], count: int,
                   flush: bool) -> list[float]:
        """Milliseconds between CUDA events recorded on the current stream around each call (what the
        call costs on the GPU's timeline: its kernels and the gaps its Python leaves between them)."""
        cuda = self.torch.cuda
        starts = [cuda.Event(enable_timing=True) for _ in range(count)]
        ends = [cuda.Event(enable_timing=True) for _ in range(count)]
        for k in range(count):
            prepare()
            if flush:
                self.flush_l2()
            starts[k].record()
            call()
            ends[k].record()
        self.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def kernel_activity(self, call: Callable[[], Any], prepare: Callable[[], None], count: int,
                        flush: bool) -> list[list[tuple[str, float]]]:
        """Per call, the (name, milliseconds) of each GPU kernel it launched, from CUPTI activity records
        (torch.profiler, CUDA activities only). The profiler runs around the call alone: the L2 flush and
        the input preparation happen before it starts, so their kernels are not counted."""
        from torch.profiler import ProfilerActivity, profile
        per_call = []
        for _ in range(count):
            prepare()
            if flush:
                self.flush_l2()
            self.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                call()
                self.synchronize()
            per_call.append(_kernel_records(prof, self.torch))
        return per_call


    def kernel_metrics(self, call: Callable[[], Any], prepare: Callable[[], None], names: list[str],
                       flush: bool) -> dict:
        """CUPTI metrics of one call's kernels, one value per metric for the call (counts summed, rates
        and percentages weighted by each kernel's duration), from kforge's range profiler
        (``cupti_metrics``: libkforge_cupti.so, kernel replay, one range per kernel). `prepare` (and the
        L2 flush) run before the call, outside the ranges. Raises ``ProfilerUnavailable`` with the
        reason where CUPTI metrics cannot be had."""
        from kforge.triton.cupti_metrics import CuptiProfiler
        if self._cupti is None:
            self.synchronize()
            self._cupti = CuptiProfiler(self.index)

        def before():
            prepare()
            if flush:
                self.flush_l2()
            self.synchronize()

        def run():
            call()
            self.synchronize()

        return self._cupti.metrics(list(names), run, before)


def _kernel_records(prof, torch) -> list[tuple[str, float]]:
    """(name, ms) of the kernels in a finished torch.profiler session, in start order."""
    records = []
    try:  # Kineto's own events: one per activity record
        for e in prof.profiler.kineto_results.events():
            if e.device_type() != torch.autograd.DeviceType.CUDA:
                continue
            name = e.name()
            if name.startswith(("Memcpy", "Memset")) or name.startswith("cuda"):
                continue
            duration_ms = e.duration_ns() / 1e6 if hasattr(e, "duration_ns") else e.duration_us() / 1e3
            records.append((e.start_ns() if hasattr(e, "start_ns") else e.start_us(), name, duration_ms))
        records.sort()
        return [(name, ms) for _, name, ms in records]
    except AttributeError:
        pass
    for e in prof.events():  # FunctionEvents: kernels are the device-side ones
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            us = getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)
            records.append((e.time_range.start, e.name, us / 1e3))
    records.sort()
    return [(name, ms) for _, name, ms in records]


def make_device(kind: str, device: int):
    if kind == "fake":
        return FakeDevice(device)
    return TorchDevice(device)
