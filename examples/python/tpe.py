"""A kforge strategy written in Python: the tree-structured Parzen estimator (Bergstra et al., NeurIPS 2011).

    strategy: {type: python, params: {module: tpe.py, class: TPE, startup: 5}}

After `startup` uniform draws, the observations are split into the best `gamma` share (good) and the rest
(bad); each parameter gets a density over its values for each set (a Gaussian kernel over the value index
for ordered numbers, counts for the others, plus a uniform prior), and of `candidates` configurations drawn
from the good densities the one with the largest l(x) / g(x) is proposed. Parameters are independent in
the model, so TPE learns main effects fast and cannot see interactions.

Measured (docs/benchmarks.md, "Alignment inputs"): on benchmark_hub's convolution/MI250X, 100 seeds, P
-0.80 (startup 10) and -0.45 (startup 5), far below random search (0): the best configurations there need
four parameters at once (no shared memory, a power-of-two block width, tile_y 2 or 4, a small block
height) while the no-shared-memory half is slower on average, so the good densities steer away from them.
"""
import math

import numpy as np

import kforge


class TPE:
    """Tree-structured Parzen estimator over the valid configurations (independent per-parameter densities)."""

    options = {
        "startup": kforge.option(int, 10, "uniform draws before the densities are used", min=1),
        "gamma": kforge.option(float, 0.15, "share of the observations in the good set", min=0.01, max=0.9),
        "candidates": kforge.option(int, 24, "draws from the good densities per proposal", min=1),
        "bandwidth": kforge.option(float, 0.15, "kernel width over an ordered parameter, as a share of its values",
                                   min=0.0, max=5.0),
        "prior": kforge.option(float, 1.0, "weight of the uniform component of each density", min=0.0),
    }

    def __init__(self, space, seed, startup, gamma, candidates, bandwidth, prior):
        self.startup, self.gamma, self.ncand, self.bw, self.prior = startup, gamma, candidates, bandwidth, prior
        self.rng = np.random.default_rng(seed)  # every random choice from the seed
        self.space = space
        # The uniform draws: a seeded permutation of the valid set where it can be listed, seeded samples
        # on a space too large to enumerate (kforge.UniformDraws).
        self.draws = kforge.UniformDraws(space, seed)
        values = space.parameters.values()
        self.sizes = [len(v) for v in values]
        self.ordered = [len(v) > 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
                        for v in values]
        self.seen = set()
        self.obs = []  # (configuration, log time or inf when it failed)

    def propose(self, n, state):
        self.seen.update(tuple(c) for c in state.pending)  # a run's start configurations among them
        out = []
        while len(out) < n:
            c = self._draw() if len(self.obs) >= self.startup else None
            c = c or self._uniform()
            if c is None:
                break
            self.seen.add(c)
            out.append(c)
        return out

    def observe(self, trials):
        for t in trials:  # its proposals and a run's start configurations
            self.seen.add(tuple(t.config))
            self.obs.append((tuple(t.config), math.log(t.time_ms) if t.ok else math.inf))

    def finished(self):
        return self.draws.total is not None and len(self.seen) >= self.draws.total

    def _uniform(self):
        return self.draws.next(self.seen)

    def _density(self, p, rows):
        k = self.sizes[p]
        d = np.full(k, self.prior / k)
        if self.ordered[p] and self.bw > 0:
            idx = np.arange(k)
            sigma = max(0.5, self.bw * k)
            for r in rows:
                w = np.exp(-0.5 * ((idx - r[p]) / sigma) ** 2)
                d += w / w.sum()
        else:
            for r in rows:
                d[r[p]] += 1.0
        return d / d.sum()

    def _draw(self):
        ranked = [c for c, _ in sorted(self.obs, key=lambda o: o[1])]  # failures (inf) last
        ngood = max(1, math.ceil(self.gamma * len(ranked)))
        good, bad = ranked[:ngood], ranked[ngood:]
        dims = range(len(self.sizes))
        lgood = [self._density(p, good) for p in dims]
        ratio = [np.log(lgood[p]) - np.log(self._density(p, bad)) for p in dims]
        best, best_score = None, -math.inf
        drawn = tries = 0
        while drawn < self.ncand and tries < 50 * self.ncand:
            tries += 1
            c = tuple(int(self.rng.choice(self.sizes[p], p=lgood[p])) for p in dims)
            if c in self.seen or not self.space.is_valid(c):
                continue
            drawn += 1
            score = sum(ratio[p][c[p]] for p in dims)
            if score > best_score:
                best, best_score = c, score
        return best
