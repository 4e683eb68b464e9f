"""Inputs of TritonBench-G's add_example.add_wrapper (the operator is read from ../shared at run time):
two sizes that are multiples of no block (checked), then 2^24 elements (timed), as its speed harness
sweeps powers of two up to 2^27."""
import torch


def shapes():
    return [(torch.rand(n, device="cuda"), torch.rand(n, device="cuda")) for n in (77, 1000003, 1 << 24)]
