"""A program for the program worker's fake device (numpy, no GPU): a stand-in for Triton's decorator, a
kernel launched as ``kernel[grid](...)``, and wrappers with the knobs a real program has (a literal in the
wrapper, constexpr arguments and launch keywords at the launch). MODE plants faults:
0 correct, 1 one wrong element, 2 output not written, 3 the process dies, 4 it hangs, 5 the device
faults, 6 the launch raises, 7 an input is overwritten, 8 a difference within the tolerance, 9 the
compile outlasts its limit (what kforge.triton.bounded_compile raises)."""
import os
import time

import numpy as np

from kforge.triton.bounded_compile import CompileTimeout
from kforge.triton.program_devices import fake_break_device, fake_empty
from kforge.triton.program_devices import fake_tl as tl
from kforge.triton.program_devices import fake_triton as triton  # the fake device runs no GPU


@triton.jit
def axpy_kernel(x, y, out, n, alpha, BLOCK: tl.constexpr, MODE: tl.constexpr):
    if MODE == 2:
        return
    if MODE == 3:
        os._exit(7)
    if MODE == 4:
        time.sleep(3600)
    if MODE == 5:
        fake_break_device()
    if MODE == 9:
        raise CompileTimeout("Triton's compile of axpy_kernel took longer than 10 s (killed)")
    if MODE == 6:
        raise RuntimeError("out of resources: shared memory, required: 300000, hardware limit: 232448")
    out[...] = alpha * x + y
    if MODE == 1:
        out[-1] += 1
    if MODE == 7:
        x[0] = 0
    if MODE == 8:
        out[...] += np.float32(1e-7)


def axpy(x, y, alpha):
    print("a program's print goes to the log, never to the protocol")
    out = fake_empty(x.shape, x.dtype)
    MODE = 0
    axpy_kernel[(1,)](x, y, out, x.size, alpha, BLOCK=64, MODE=MODE, num_warps=4)
    return out, {"sum": float(out.sum()), "n": int(x.size)}


@triton.jit
def update_kernel(x, acc, dst, BLOCK: tl.constexpr):
    acc += x           # read and written: restored, never poisoned
    dst[...] = 2 * x   # written only: poisoned before each call


def update(x, acc, dst):
    update_kernel[(1,)](x, acc, dst, BLOCK=16)


def noisy(x, y, alpha):
    """An original that does not reproduce itself (as a kernel with a race does): each call differs."""
    noisy.calls = getattr(noisy, "calls", 0) + 1
    out = fake_empty(x.shape, x.dtype)
    out[...] = x + np.float32(noisy.calls)
    return out


def draws(x, y, alpha):
    """An original that draws numbers of its own inside the call (TritonBench-G's batched_vecmat_mult
    makes its matrices with torch.randn): reproducible when every compared call starts from the seed."""
    out = fake_empty(x.shape, x.dtype)
    out[...] = x * np.random.rand(*x.shape).astype(x.dtype)
    return out


def padded(x, y, alpha):
    """An original that leaves its output's last two elements as the allocator gave them (padding, as
    TritonBench-G's attention_fwd_triton2 leaves 32 of 128 columns). PAD: the elements left unwritten."""
    out = fake_empty(x.shape, x.dtype)
    PAD = 2
    out[:x.size - PAD] = alpha * x[:x.size - PAD] + y[:x.size - PAD]
    return out


@triton.jit
def widen_kernel(x, out, MODE: tl.constexpr):
    out[...] = x.astype(out.dtype) * 3
    if MODE == 1:  # another order of a sum: off by 1e-3 relative, what f16 arithmetic allows
        out[...] *= out.dtype.type(1 + 1e-3)


def widen(x):
    """An f32 result from the call's input (f16 in widen_shapes, f32 in widen_shapes_f32); MODE 1 plants
    a difference of 1e-3 relative."""
    out = fake_empty(x.shape, "float32")
    MODE = 0
    widen_kernel[(1,)](x, out, MODE=MODE)
    return out


def racy(x, y, alpha):
    """An original with a race (as TritonBench-G's attention kernels have): each call changes one element,
    a different one each time; the rest is alpha * x + y. RACE: how many elements a call changes; LEFT:
    how many at the end it leaves unwritten (the original: none)."""
    racy.calls = getattr(racy, "calls", 0) + 1
    out = fake_empty(x.shape, x.dtype)
    LEFT = 0  # a candidate's bug: its last LEFT elements never written
    out[:x.size - LEFT] = alpha * x[:x.size - LEFT] + y[:x.size - LEFT]
    RACE = 1
    for i in range(RACE):
        out[(racy.calls * 7 + i) % x.size] += np.float32(1 + racy.calls)
    return out


def racy_large(x, y, alpha):
    """An original whose race shows on the larger size only (as apply_penalty's did on an H100: some sizes'
    further calls agree): each call changes RACE elements where x has at least QUIET_BELOW of them."""
    racy_large.calls = getattr(racy_large, "calls", 0) + 1
    out = alpha * x + y
    QUIET_BELOW = 1000
    RACE = 1
    if x.size >= QUIET_BELOW:
        for i in range(RACE):
            out[(racy_large.calls * 7 + i) % x.size] += np.float32(1 + racy_large.calls)
    return out
