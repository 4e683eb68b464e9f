"""The search's timer against the final measurement's on short calls: a benchmark that prints a table.

    python -m kforge.tritonbench_g.flush_bench DATA [OP ...] [--busy 4] [--calls 200]

For each operator (default: the four whose searches timed 4-9x do_bench's times in the campaign,
docs/tritonbench-g.md 2026-12-07 seventh session) its original's call on the harness's largest size,
timed three ways: ``triton.testing.do_bench`` (the final measurement's timer: median, its 256 MiB L2
flush, 25 ms warm-up, 100 ms of repetitions), and the program worker's timer
(``TorchDevice.time_calls``: CUDA events around each call after an L2 flush; median of ``--calls``)
with the flush buffer it had until 2026-12-07 (twice the L2) and with the one it has now
(``flush_bytes``: at least do_bench's). Each with the CPU idle and with ``--busy`` processes spinning on
other cores (a search's compiling workers load the host while one of them times). Ratios to do_bench
above 1 are host time the timer did not hide.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kforge.triton import program_devices  # noqa: E402
from kforge.tritonbench_g.harness import operator  # noqa: E402

DEFAULT_OPS = ("apply_penalty", "l2_norm_bwd", "l2_norm_triton1", "l2_norm_triton2")


def _spin(stop) -> None:
    while not stop.is_set():
        pass


class BusyCores:
    """`n` processes spinning until the block ends (none for n = 0)."""

    def __init__(self, n: int):
        self.n, self.procs, self.stop = n, [], multiprocessing.Event()

    def __enter__(self):
        self.procs = [multiprocessing.Process(target=_spin, args=(self.stop,), daemon=True) for _ in range(self.n)]
        for p in self.procs:
            p.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for p in self.procs:
            p.join(5)


def worker_timer_ms(device, call, flush_bytes: int, calls: int) -> float:
    """The program worker's median (TorchDevice.time_calls) with an L2 flush of `flush_bytes`."""
    device.flush_buffer = device.torch.empty(flush_bytes, dtype=device.torch.int8, device=device.dev)
    device.time_calls(call, lambda: None, 5, False)  # warm-up, as the worker's
    return statistics.median(device.time_calls(call, lambda: None, calls, True))


def bench_op(data: str, op: str, device, busy: int, calls: int) -> list[dict]:
    import triton.testing
    h = operator(data, op)
    x = h.shapes(str(len(h.inputs) - 1))[0][0]  # the largest size, alone on the GPU
    bound = h.bind(h.original)

    def call():
        bound(x)

    call()
    device.synchronize()
    rows = []
    for load in sorted({0, busy}):
        with BusyCores(load):
            rows.append({"op": op, "busy": load,
                         "do_bench": triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median"),
                         "twice_l2": worker_timer_ms(device, call, 2 * device.l2_bytes, calls),
                         "now": worker_timer_ms(device, call, program_devices.flush_bytes(device.l2_bytes), calls)})
    return rows


def table(rows: list[dict], l2_bytes: int) -> str:
    old_mib, new_mib = (round(b / (1 << 20)) for b in (2 * l2_bytes, program_devices.flush_bytes(l2_bytes)))
    out = [f"| operator | busy cores | do_bench ms | worker, flush {old_mib} MiB (ratio) | "
           f"worker, flush {new_mib} MiB (ratio) |", "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['op']} | {r['busy']} | {r['do_bench']:.4f} | {r['twice_l2']:.4f} "
                   f"({r['twice_l2'] / r['do_bench']:.2f}) | {r['now']:.4f} ({r['now'] / r['do_bench']:.2f}) |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="TritonBench-G's folder (kernels/, perf/)")
    ap.add_argument("ops", nargs="*", default=list(DEFAULT_OPS))
    ap.add_argument("--busy", type=int, default=4, help="processes spinning beside the timing (0: idle only)")
    ap.add_argument("--calls", type=int, default=200, help="timed calls of the worker's timer")
    a = ap.parse_args(argv)
    device = program_devices.TorchDevice(0)
    rows = []
    for op in a.ops:
        try:
            rows += bench_op(a.data, op, device, a.busy, a.calls)
        except Exception as e:  # an operator that does not run here is a line, not the end of the table
            print(f"{op}: not measured: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"{device.describe()['name']}; L2 {device.l2_bytes / (1 << 20):.0f} MiB")
    print(table(rows, device.l2_bytes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
