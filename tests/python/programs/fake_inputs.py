"""Inputs of fake_ops.py: one call per shape (seeded by the worker)."""
import numpy as np


def axpy_shapes():
    return [(np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32), 2.0)
            for n in (7, 100, 1000)]


def update_shapes():
    return [{"args": [np.random.randn(n).astype(np.float32), np.ones(n, np.float32)],
             "kwargs": {"dst": np.zeros(n, np.float32)}} for n in (5, 50)]
