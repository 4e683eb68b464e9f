"""A kforge strategy written in Python: a seeded walk over the neighbours of the best configuration so far.

    strategy: {type: python, params: {module: neighbour_walk.py, class: NeighbourWalk, restarts: 8}}
"""
import kforge


class NeighbourWalk:
    """Seeded walk over the neighbours of the best so far; random restarts (without replacement) when none is left."""

    options = {
        "restarts": kforge.option(int, 4, "random proposals before the walk starts", min=1),
        "neighbourhood": kforge.option(str, "hamming", "which neighbours the walk visits",
                                       choices=["hamming", "adjacent", "strictly_adjacent"]),
    }

    def __init__(self, space, seed, restarts, neighbourhood):
        self.space, self.restarts, self.kind = space, restarts, neighbourhood
        # The restarts: seeded uniform draws without repeats (a permutation of the valid set where it can
        # be listed, seeded samples on a space too large to enumerate).
        self.draws = kforge.UniformDraws(space, seed)
        self.exhausted = False
        self.seen = set()                       # proposed or pending so far (tuples of value indices)
        self.best, self.told = None, 0

    def propose(self, n, state):
        self.seen.update(tuple(c) for c in state.pending)  # a run's start configurations among them
        out = []
        if self.best is not None and self.told >= self.restarts:
            for c in self.space.neighbours(self.best[1], self.kind):
                if len(out) < n and c not in self.seen:
                    out.append(c)
                    self.seen.add(c)
        while len(out) < n and not self.exhausted:
            c = self.draws.next(self.seen)
            if c is None:
                self.exhausted = True
                break
            out.append(c)
            self.seen.add(c)
        return out

    def observe(self, trials):
        for t in trials:                        # its proposals and a run's start configurations
            self.seen.add(tuple(t.config))
            self.told += 1
            if t.ok and (self.best is None or t.time_ms < self.best[0]):
                self.best = (t.time_ms, t.config)

    def finished(self):
        return self.exhausted
