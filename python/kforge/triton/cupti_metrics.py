"""CUPTI metrics of the kernels one Python call launches, through kforge's own range profiler.

The program worker times Triton programs in Python; their CUPTI metrics (DRAM and SM throughput against
peak, achieved occupancy, ...) come from the range profiler kforge-worker uses, built as
``libkforge_cupti.so`` with a C interface (``evaluators/cuda/worker/profiler_capi.h``) and loaded here
with ctypes. Auto ranges with kernel replay: every kernel the call launches is a range of its own, and
CUPTI replays each as often as the metric set needs, restoring the memory it touches, so the call runs
once. The per-kernel values are then combined into one value per metric for the call (``aggregate``).

(torch.profiler's experimental metric collection through Kineto returned no values on the H200 with
torch 2.11, docs/triton.md; this replaced it.)

Contract: ``CuptiProfiler(ordinal)`` must be made on the thread whose current CUDA context is the
device's (torch's, once torch has initialised the device); it raises ``ProfilerUnavailable`` with the
reason (library not found, no driver, profiling not permitted) and never crashes the process.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
from pathlib import Path
from typing import Any, Callable

LIBRARY_NAME = "libkforge_cupti.so"
# The metric that weighs per-kernel rates into the call's: each kernel's duration. Always collected.
DURATION = "gpu__time_duration.sum"


class ProfilerUnavailable(RuntimeError):
    """CUPTI metrics cannot be collected here; the message says why."""


def find_library() -> Path | None:
    """Where libkforge_cupti.so is: $KFORGE_CUPTI_LIBRARY, else next to $KFORGE_WORKER (a build folder)
    or in its ../lib (the device bundle, .device/lib), else the repository's build/ and .device/lib."""
    if os.environ.get("KFORGE_CUPTI_LIBRARY"):
        return Path(os.environ["KFORGE_CUPTI_LIBRARY"])
    candidates = []
    if os.environ.get("KFORGE_WORKER"):
        worker_dir = Path(os.environ["KFORGE_WORKER"]).resolve().parent
        candidates += [worker_dir / LIBRARY_NAME, worker_dir.parent / "lib" / LIBRARY_NAME]
    root = Path(__file__).resolve().parents[3]
    candidates += [root / "build" / LIBRARY_NAME, root / ".device" / "lib" / LIBRARY_NAME]
    return next((c for c in candidates if c.is_file()), None)


def combine_kind(name: str) -> str:
    """How a metric's per-kernel values combine into the call's (NCU's naming, unit__counter.rollup.sub):
    'sum' for counts and durations (``.sum``), 'max' and 'min' for those rollups, and 'weighted' (the mean
    weighted by each kernel's duration) for rates, ratios, averages and percentages
    (``.avg``, ``.pct``, ``.ratio``, ``.per_second``, ``pct_of_peak``)."""
    parts = name.split(".")
    if any(p in ("per_second", "ratio", "pct") or p.startswith("pct_of_peak") for p in parts[1:]):
        return "weighted"
    if len(parts) >= 2 and parts[1] in ("sum", "max", "min"):
        return parts[1]
    return "weighted"


def aggregate(ranges: list[dict], names: list[str]) -> dict[str, float]:
    """One value per metric for the whole call from the per-kernel ``ranges`` ([{"name", "metrics"}]).
    A kernel whose value is missing (null/NaN) is left out of that metric; a metric no kernel has is
    left out of the result. Weighted means use the kernels' ``gpu__time_duration.sum`` (equal weights
    where it is missing)."""
    out: dict[str, float] = {}
    for name in names:
        kind = combine_kind(name)
        pairs = []
        for r in ranges:
            v = r.get("metrics", {}).get(name)
            if isinstance(v, (int, float)) and not math.isnan(v):
                w = r.get("metrics", {}).get(DURATION)
                pairs.append((float(v), float(w) if isinstance(w, (int, float)) and w and w > 0 else None))
        if not pairs:
            continue
        values = [v for v, _ in pairs]
        if kind == "sum":
            out[name] = sum(values)
        elif kind == "max":
            out[name] = max(values)
        elif kind == "min":
            out[name] = min(values)
        elif all(w is not None for _, w in pairs):
            out[name] = sum(v * w for v, w in pairs) / sum(w for _, w in pairs)
        else:
            out[name] = sum(values) / len(values)
    return out


_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class CuptiProfiler:
    """The range profiler of CUDA device `ordinal` in this process (see the module's contract)."""

    def __init__(self, ordinal: int, library: str | os.PathLike | None = None):
        path = Path(library) if library else find_library()
        if path is None:
            raise ProfilerUnavailable(f"{LIBRARY_NAME} not found (build it: scripts/build; or set "
                                      "KFORGE_CUPTI_LIBRARY)")
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise ProfilerUnavailable(f"cannot load {path}: {e}") from None
        lib.kf_cupti_open.restype = ctypes.c_void_p
        lib.kf_cupti_open.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        lib.kf_cupti_profile.restype = ctypes.c_void_p
        lib.kf_cupti_profile.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CALLBACK, _CALLBACK,
                                         ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        lib.kf_cupti_free.restype = None
        lib.kf_cupti_free.argtypes = [ctypes.c_void_p]
        lib.kf_cupti_close.restype = None
        lib.kf_cupti_close.argtypes = [ctypes.c_void_p]
        self._lib = lib
        err = ctypes.create_string_buffer(1024)
        self._handle = lib.kf_cupti_open(int(ordinal), err, len(err))
        if not self._handle:
            raise ProfilerUnavailable(err.value.decode(errors="replace") or "kf_cupti_open failed")

    def close(self) -> None:
        if getattr(self, "_handle", None):
            self._lib.kf_cupti_close(self._handle)
            self._handle = None

    def __del__(self):  # pragma: no cover - interpreter shutdown order
        try:
            self.close()
        except Exception:
            pass

    def profile_ranges(self, names: list[str], call: Callable[[], Any], prepare: Callable[[], None],
                       max_ranges: int = 64) -> dict:
        """The raw answer: {"chip", "passes", "dropped", "ranges": [{"name", "metrics"}]} for the kernels
        `call` launches (`prepare` runs before each pass, outside the ranges). An exception raised by
        `call` or `prepare` is raised here after the profiler has finished."""
        if not self._handle:
            raise ProfilerUnavailable("the profiler is closed")
        raised: list[BaseException] = []

        def guard(fn):
            def run(_user):
                if raised:
                    return
                try:
                    fn()
                except BaseException as e:  # noqa: BLE001 - carried across the C boundary, raised below
                    raised.append(e)
            return _CALLBACK(run)

        prepare_cb, call_cb = guard(prepare), guard(call)
        wanted = list(dict.fromkeys([*names, DURATION]))
        err = ctypes.create_string_buffer(2048)
        text = self._lib.kf_cupti_profile(self._handle, ",".join(wanted).encode(), prepare_cb, call_cb, None,
                                          int(max_ranges), err, len(err))
        if raised:
            if text:
                self._lib.kf_cupti_free(text)
            raise raised[0]
        if not text:
            raise ProfilerUnavailable(err.value.decode(errors="replace") or "kf_cupti_profile failed")
        try:
            return json.loads(ctypes.string_at(text).decode())
        finally:
            self._lib.kf_cupti_free(text)

    def metrics(self, names: list[str], call: Callable[[], Any], prepare: Callable[[], None],
                max_ranges: int = 64) -> dict[str, float]:
        """Each of `names` for the whole call (``aggregate``), with ``gpu__time_duration.sum``,
        ``cupti.kernels`` (ranges profiled), ``cupti.passes`` and ``cupti.ranges_dropped`` (kernels past
        `max_ranges`, not profiled)."""
        answer = self.profile_ranges(names, call, prepare, max_ranges)
        ranges = answer.get("ranges", [])
        out = aggregate(ranges, list(dict.fromkeys([*names, DURATION])))
        out["cupti.kernels"] = float(len(ranges))
        out["cupti.passes"] = float(answer.get("passes", 0))
        out["cupti.ranges_dropped"] = float(answer.get("dropped", 0))
        return out


def _loaded_cupti() -> list[str]:
    """The CUPTI and perfworks libraries mapped into this process (Linux), to see whose copy is used."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = {line.split()[-1] for line in f if "cupti" in line or "nvperf" in line}
        return sorted(p for p in paths if p.startswith("/"))
    except OSError:
        return []


def main(argv=None) -> int:
    """A check on a GPU: the metrics of a torch elementwise add of 2^24 floats (one kernel) and of two
    adds (two kernels); with --after-kineto, after a torch.profiler session has run in the process (as in
    the program worker). Prints the answers and the CUPTI libraries loaded."""
    import argparse
    import faulthandler
    faulthandler.enable()
    ap = argparse.ArgumentParser(description=main.__doc__.split(";")[0])
    ap.add_argument("--after-kineto", action="store_true")
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args(argv)
    import torch
    torch.cuda.set_device(a.device)
    x = torch.rand(1 << 24, device="cuda")
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    if a.after_kineto:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]):
            torch.add(x, x, out=y)
            torch.cuda.synchronize()
    print("loaded before:", _loaded_cupti(), flush=True)
    profiler = CuptiProfiler(a.device)
    print("opened; loaded:", _loaded_cupti(), flush=True)
    names = ["dram__bytes_read.sum", "dram__bytes_write.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
             "sm__throughput.avg.pct_of_peak_sustained_elapsed"]

    def one():
        torch.add(x, x, out=y)
        torch.cuda.synchronize()

    def two():
        torch.add(x, x, out=y)
        torch.mul(y, 2.0, out=y)
        torch.cuda.synchronize()

    for label, call in (("one add (expect ~67 MB read, ~67 MB written)", one), ("add then mul", two)):
        print(label, json.dumps(profiler.profile_ranges(names, call, lambda: None)), flush=True)
        print(label, "aggregated", json.dumps(profiler.metrics(names, call, lambda: None)), flush=True)
    profiler.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
