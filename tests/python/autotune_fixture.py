"""Kernels and stand-ins for test_autotune.py (and the second process it starts): a Triton kernel tuned by
kforge.autotune without a GPU. Triton's JIT specialises and the compile pool compiles for real (sm_90, on
the CPU); the launch and the timer are fakes (`launch`, `bench`), and numpy arrays stand in for tensors."""
import numpy as np
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver


class FakeDriver:
    """What Triton's JIT asks of the active driver to specialise and compile (no launch)."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_benchmarker(self):
        raise RuntimeError("no GPU here: pass do_bench")


class _Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class Tensor:
    """A numpy array that Triton's JIT takes for a tensor (data_ptr, a torch-like dtype), with the clone/copy_
    that kforge.autotune snapshots and restores with."""

    def __init__(self, a):
        self.a = np.ascontiguousarray(a, dtype=np.float32)
        self.dtype = _Dtype(self.a.dtype.name)

    def data_ptr(self):
        return self.a.ctypes.data

    def clone(self):
        return Tensor(self.a.copy())

    def copy_(self, other):
        np.copyto(self.a, other.a)

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


def tensor(values):
    return Tensor(values)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128, 256) for w in (2, 4)]
# Fake kernel times (ms) by (BLOCK, num_warps); (256, 2), the fastest, computes a wrong result.
TIMES = {(64, 2): 0.7, (64, 4): 0.9, (128, 2): 0.5, (128, 4): 0.3, (256, 2): 0.1, (256, 4): 0.4}
WRONG = {(256, 2)}


class Counters:
    launches = 0
    benches = 0
    last = None


def launch(fn, args, kwargs):
    """Stands in for kernel[grid](...): out = x + y, except for the configurations in WRONG."""
    Counters.launches += 1
    Counters.last = (kwargs["BLOCK"], kwargs["num_warps"])
    x, y, out = args[0], args[1], args[2]
    out.a[:] = x.a - y.a if Counters.last in WRONG else x.a + y.a


def bench(kernel_call, quantiles):
    """Stands in for do_bench: runs the call once and answers the configuration's time from TIMES."""
    Counters.benches += 1
    kernel_call()
    t = TIMES[Counters.last]
    return [t, t * 0.9, t * 1.1]


def use_fake_driver():
    driver.set_active(FakeDriver())
