"""The search's timer against the final measurement's on short calls: a benchmark that prints a table.

    python -m kforge.tritonbench_g.flush_bench DATA [OP ...] [--busy 4] [--calls 200]

For each operator (default: the four whose searches timed 4-9x do_bench's times in the campaign,
docs/tritonbench-g.md 2026-12-07 seventh session) its original's call on the harness's largest size,
timed three ways: ``triton.testing.do_bench`` (the final measurement's timer: median, its 256 MiB L2
flush, 25 ms warm-up, 100 ms of repetitions), and the program worker's timer
(``TorchDevice.time_calls``: CUDA events around each call after an L2 flush; median of ``--calls``)
with the flush buffer it had until 2026-12-07 (twice the L2) and with the one it has now
(``flush_bytes``: at least do_bench's). Each with the CPU idle and with ``--busy`` processes spinning on
other cores (a search's compiling workers load the host while one of them times); the three timers take
turns in an order that rotates between loads. Ratios to do_bench above 1 are host time the timer did not
hide. A row is printed as soon as it is measured; an operator that fails is a line saying why.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import os
import statistics
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kforge.triton import program_devices  # noqa: E402
from kforge.tritonbench_g.harness import operator  # noqa: E402

DEFAULT_OPS = ("apply_penalty", "l2_norm_bwd", "l2_norm_triton1", "l2_norm_triton2")
SPIN_LIMIT_S = 300.0  # a spinner stops by itself after this, or when its parent is gone
TIMERS = ("do_bench", "twice_l2", "now")


def _spin(stop, parent: int) -> None:
    """Burns a core until `stop` is set (a lock-free flag), the parent exits or SPIN_LIMIT_S passes."""
    end = time.monotonic() + SPIN_LIMIT_S
    while not stop.value:
        for _ in range(100_000):
            pass
        if os.getppid() != parent or time.monotonic() > end:
            return


class BusyCores:
    """`n` processes spinning until the block ends (none for n = 0)."""

    def __init__(self, n: int):
        self.n, self.procs, self.stop = n, [], multiprocessing.RawValue(ctypes.c_bool, False)

    def __enter__(self):
        self.procs = [multiprocessing.Process(target=_spin, args=(self.stop, os.getpid()), daemon=True)
                      for _ in range(self.n)]
        for p in self.procs:
            p.start()
        if self.procs:
            time.sleep(0.2)  # all of them spinning before the timing starts
        return self

    def __exit__(self, *exc):
        self.stop.value = True
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.terminate()


def worker_timer_ms(device, call, flush_bytes: int, calls: int) -> float:
    """The program worker's median (TorchDevice.time_calls) with an L2 flush of `flush_bytes`."""
    device.flush_buffer = device.torch.empty(flush_bytes, dtype=device.torch.int8, device=device.dev)
    device.time_calls(call, lambda: None, 5, False)  # warm-up, as the worker's
    return statistics.median(device.time_calls(call, lambda: None, calls, True))


def bench_op(data: str, op: str, device, busy: int, calls: int):
    """Yields a row per CPU load (idle, then `busy` spinners): the three timers' milliseconds."""
    import triton.testing
    device.torch.manual_seed(0)  # the harness draws its sizes from torch's generator
    h = operator(data, op)
    x = h.shapes(str(len(h.inputs) - 1))[0][0]  # the largest size, alone on the GPU
    bound = h.bind(h.original)

    def call():
        bound(x)

    call()
    device.synchronize()
    timers = {"do_bench": lambda: triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median"),
              "twice_l2": lambda: worker_timer_ms(device, call, 2 * device.l2_bytes, calls),
              "now": lambda: worker_timer_ms(device, call, program_devices.flush_bytes(device.l2_bytes), calls)}
    for turn, load in enumerate(sorted({0, busy})):
        order = TIMERS[turn % 3:] + TIMERS[:turn % 3]
        with BusyCores(load):
            row = {"op": op, "busy": load, **{name: timers[name]() for name in order}}
        yield row


def header(l2_bytes: int) -> list[str]:
    old_mib, new_mib = (round(b / (1 << 20)) for b in (2 * l2_bytes, program_devices.flush_bytes(l2_bytes)))
    return [f"| operator | busy cores | do_bench ms | worker, flush {old_mib} MiB (ratio) | "
            f"worker, flush {new_mib} MiB (ratio) |", "|---|---|---|---|---|"]


def row_line(r: dict) -> str:
    def ratio(ms: float) -> str:
        return f"{ms / r['do_bench']:.2f}" if r["do_bench"] > 0 else "-"

    return (f"| {r['op']} | {r['busy']} | {r['do_bench']:.4f} | {r['twice_l2']:.4f} ({ratio(r['twice_l2'])}) | "
            f"{r['now']:.4f} ({ratio(r['now'])}) |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="TritonBench-G's folder (kernels/, perf/)")
    ap.add_argument("ops", nargs="*", default=list(DEFAULT_OPS))
    ap.add_argument("--busy", type=int, default=4, help="processes spinning beside the timing (0: idle only)")
    ap.add_argument("--calls", type=int, default=200, help="timed calls of the worker's timer")
    a = ap.parse_args(argv)
    device = program_devices.TorchDevice(0)
    print(f"{device.describe()['name']}; L2 {device.l2_bytes / (1 << 20):.0f} MiB")
    print("\n".join(header(device.l2_bytes)), flush=True)
    measured = 0
    for op in a.ops:
        try:
            for r in bench_op(a.data, op, device, a.busy, a.calls):
                print(row_line(r), flush=True)
                measured += 1
        except Exception as e:  # an operator that does not run here is a line, not the end of the table
            print(f"{op}: not measured: {type(e).__name__}: {str(e)[:300]}", flush=True)
    return 0 if measured else 1


if __name__ == "__main__":
    sys.exit(main())
