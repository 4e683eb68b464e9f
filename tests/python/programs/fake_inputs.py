"""Inputs of fake_ops.py: one call per shape (seeded by the worker)."""
import numpy as np


def axpy_shapes():
    return [(np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32), 2.0)
            for n in (7, 100, 1000)]


def update_shapes():
    return [{"args": [np.random.randn(n).astype(np.float32), np.ones(n, np.float32)],
             "kwargs": {"dst": np.zeros(n, np.float32)}} for n in (5, 50)]


def axpy_packed_shapes():
    """One argument per call, a tuple, as TritonBench-G's harnesses pass it to call_op."""
    return [((x, y, a),) for x, y, a in axpy_shapes()]


def bind_packed(module):
    """An adapter: the callable that unpacks the harness's tuple for the variant's axpy."""
    return lambda packed: module.axpy(*packed)


def widen_shapes():
    return [(np.random.randn(n).astype(np.float16),) for n in (8, 64)]


def widen_shapes_f32():
    return [(np.random.randn(n).astype(np.float32),) for n in (8, 64)]


def wide_shapes():
    """Sizes where one element is well under 1% (the share of a value an original may change call to call)."""
    return [(np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32), 2.0) for n in (500, 1000)]
