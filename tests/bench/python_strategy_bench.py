"""Python strategies for tests/bench/python_bench.cpp: what crossing into Python costs per proposal."""
import random


class Minimal:
    """A seeded permutation of the valid set, handed out in order: nearly no work of its own."""

    def __init__(self, space, seed):
        self.order = space.valid()
        random.Random(seed).shuffle(self.order)

    def propose(self, n):
        out = self.order[-n:]
        del self.order[-n:]
        return out

    def observe(self, trials):
        for t in trials:  # reads what a strategy reads
            t.time_ms, t.config
