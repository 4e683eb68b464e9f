"""A numpy stand-in for the part of PyTorch that kforge.suite.measure uses, so that its GPU path (inputs,
experts, the float64 reference, the checks, the interleaved timing loop) runs here without PyTorch or a GPU.
Tensors are numpy arrays; bfloat16 is float32 rounded to bfloat16's 8-bit mantissa (its element size 2);
"CUDA events" read a counter that each call advances, so times are deterministic. Only what the harness
calls exists: a new call in measure.py that this lacks fails the test, which is the point."""
import contextlib
import types

import numpy as np

__version__ = "fake"
version = types.SimpleNamespace(cuda="fake")


class dtype:
    def __init__(self, name, np_type, size):
        self.name, self.np, self.size = name, np_type, size

    def __repr__(self):
        return f"torch.{self.name}"


float32 = dtype("float32", np.float32, 4)
float64 = dtype("float64", np.float64, 8)
bfloat16 = dtype("bfloat16", np.float32, 2)
int8 = dtype("int8", np.int8, 1)
bool = dtype("bool", np.bool_, 1)  # noqa: A001 (torch's name)
_BY_NP = {np.dtype(np.float64): float64, np.dtype(np.int8): int8, np.dtype(np.bool_): bool}


def _bf16(a):
    bits = np.asarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return rounded.view(np.float32)


class Tensor:
    _next_ptr = 1 << 20

    def __init__(self, a, dt=None):
        self.a = np.asarray(a)
        self.dtype = dt or _BY_NP.get(self.a.dtype, float32)
        self._ptr = Tensor._next_ptr
        Tensor._next_ptr += 1 << 20

    # shape and type
    def numel(self):
        return self.a.size

    def element_size(self):
        return self.dtype.size

    def data_ptr(self):
        return self._ptr

    def view(self, *shape):
        t = Tensor(self.a.reshape(shape), self.dtype)
        t._ptr = self._ptr
        return t

    def reshape(self, *shape):
        return Tensor(self.a.reshape(shape), self.dtype)

    def flatten(self):
        return Tensor(self.a.reshape(-1).copy(), self.dtype)

    def contiguous(self):
        return Tensor(np.ascontiguousarray(self.a), self.dtype)

    def clone(self):
        return Tensor(self.a.copy(), self.dtype)

    def to(self, dt):
        return Tensor(_bf16(self.a) if dt is bfloat16 else self.a.astype(dt.np), dt)

    def double(self):
        return self.to(float64)

    def float(self):
        return self.to(float32)

    def transpose(self, i, j):
        return Tensor(np.swapaxes(self.a, i, j), self.dtype)

    def tril(self):
        return Tensor(np.tril(self.a), self.dtype)

    def tolist(self):
        return self.a.tolist()

    def item(self):
        return self.a.item()

    # arithmetic
    @staticmethod
    def _v(x):
        return x.a if isinstance(x, Tensor) else x

    def __mul__(self, o):
        return Tensor(self.a * self._v(o), self.dtype)

    def __sub__(self, o):
        return Tensor(self.a - self._v(o), self.dtype)

    def __add__(self, o):
        return Tensor(self.a + self._v(o), self.dtype)

    __radd__ = __add__
    __rmul__ = __mul__

    def __matmul__(self, o):
        return Tensor(self.a @ o.a, self.dtype)

    def __le__(self, o):
        return Tensor(self.a <= self._v(o), bool)

    def __invert__(self):
        return Tensor(~self.a, bool)

    def __getitem__(self, i):
        return Tensor(self.a[i], self.dtype)

    def __setitem__(self, i, v):
        self.a[i] = self._v(v)

    def abs(self):
        return Tensor(np.abs(self.a), self.dtype)

    def sum(self):
        return Tensor(self.a.sum())

    def max(self):
        return Tensor(self.a.max())

    def nan_to_num(self, v):
        return Tensor(np.nan_to_num(self.a, nan=v), self.dtype)

    def nonzero(self):
        return Tensor(np.argwhere(self.a))

    def masked_fill(self, mask, v):
        return Tensor(np.where(mask.a, v, self.a), self.dtype)

    # in place
    def fill_(self, v):
        self.a[...] = v
        return self

    def zero_(self):
        return self.fill_(0)

    def add_(self, o, alpha=1.0):
        self.a += alpha * o.a
        return self


def _make(a, dt):
    return Tensor(_bf16(a) if dt is bfloat16 else np.asarray(a, dtype=dt.np), dt)


class Generator:
    def __init__(self, device=None):
        self.rng = np.random.default_rng(0)

    def manual_seed(self, seed):
        self.rng = np.random.default_rng(seed)
        return self


def rand(n, device=None, generator=None):
    return Tensor(generator.rng.random(n, dtype=np.float32))


def randn(n, device=None, generator=None):
    return Tensor(generator.rng.standard_normal(n, dtype=np.float32))


def full(shape, v, device=None, dtype=float32):
    return _make(np.full(shape, v), dtype)


def empty(*shape, dtype=float32, device=None):
    return _make(np.zeros(shape), dtype)


def zeros(*shape, dtype=float32, device=None):
    return _make(np.zeros(shape), dtype)


def ones(*shape, dtype=float32, device=None):
    return _make(np.ones(shape), dtype)


def _mm(a, b, out_dtype=None):
    out = a.a.astype(np.float64) @ b.a.astype(np.float64)
    return _make(out, out_dtype or (float32 if a.dtype is float32 else a.dtype))


def mm(a, b, out_dtype=None):
    _Clock.now += COST["mm"]
    return _mm(a, b, out_dtype)


def matmul(a, b):
    _Clock.now += COST["mm"]
    return _mm(a, b)


def softmax(t, dim):
    e = np.exp(t.a - t.a.max(axis=dim, keepdims=True))
    return Tensor(e / e.sum(axis=dim, keepdims=True), t.dtype)


def equal(a, b):
    return a.a.shape == b.a.shape and np.array_equal(a.a, b.a)


def set_float32_matmul_precision(p):
    pass


backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)),
                                 cudnn=types.SimpleNamespace(allow_tf32=True, benchmark=False,
                                                             version=lambda: 0))


class _Clock:
    """The fake GPU's time in ms: each expert call advances it by its COST, an emulated kernel by its own."""
    now = 0.0


COST = {"mm": 1.0, "sdpa": 2.0, "conv2d": 40.0}


class Event:
    def __init__(self, enable_timing=False):
        self.t = 0.0

    def record(self):
        self.t = _Clock.now

    def elapsed_time(self, other):
        return other.t - self.t


cuda = types.SimpleNamespace(
    synchronize=lambda: None, Event=Event, current_device=lambda: 0, get_device_name=lambda: "fake GPU",
    empty_cache=lambda: None, current_stream=lambda: types.SimpleNamespace(cuda_stream=0))


# torch.nn.functional
def _pad(t, pads):
    left, right, top, bottom = pads
    return Tensor(np.pad(t.a, ((top, bottom), (left, right))), t.dtype)


def _sdpa(q, k, v, is_causal=False, scale=None):
    _Clock.now += COST["sdpa"]
    s = np.einsum("bhqd,bhkd->bhqk", q.a.astype(np.float64), k.a.astype(np.float64)) * scale
    if is_causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=np.bool_)), s, -np.inf)
    if _Attention.backend == "FLASH_ATTENTION":
        raise RuntimeError("No available kernel (fp32)")
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ v.a.astype(np.float64)).astype(np.float32)
    if _Attention.backend == "MATH":
        out = out + np.float32(1e-7)  # another backend: not bitwise the default's
    return Tensor(out)


def _conv2d(img, filt, padding):
    _Clock.now += COST["conv2d"]
    h, w = img.a.shape[2:]
    r = filt.a.shape[2]
    p = np.pad(img.a[0, 0].astype(np.float64), padding)
    out = np.zeros((h, w))
    for i in range(r):
        for j in range(r):
            out += filt.a[0, 0, i, j] * p[i:i + h, j:j + w]
    return Tensor(out.astype(np.float32).reshape(1, 1, h, w))


class _Attention:
    backend = None


class SDPBackend:
    FLASH_ATTENTION = "FLASH_ATTENTION"
    EFFICIENT_ATTENTION = "EFFICIENT_ATTENTION"
    MATH = "MATH"


@contextlib.contextmanager
def sdpa_kernel(backend):
    old, _Attention.backend = _Attention.backend, backend
    try:
        yield
    finally:
        _Attention.backend = old


functional = types.SimpleNamespace(pad=_pad, scaled_dot_product_attention=_sdpa, conv2d=_conv2d)
attention = types.SimpleNamespace(SDPBackend=SDPBackend, sdpa_kernel=sdpa_kernel)
nn = types.SimpleNamespace(functional=functional, attention=attention)


def install(monkeypatch):
    """Makes `import torch` (and torch.nn.attention) give this module."""
    import sys

    me = sys.modules[__name__]
    monkeypatch.setitem(sys.modules, "torch", me)
    monkeypatch.setitem(sys.modules, "torch.nn", nn)
    monkeypatch.setitem(sys.modules, "torch.nn.attention", attention)
