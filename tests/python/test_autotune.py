# kforge: needs the native module
"""kforge.autotune without a GPU: the decorator, the search with a kforge strategy, the parallel compile pool
(real Triton compiles for sm_90 into Triton's cache), the run store keyed by the key arguments, the check of
every candidate against the first configuration's output. The launch and the timer are fakes
(autotune_fixture.py); the lead measures the real thing on the H200 (scripts/device-autotune)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
import autotune_fixture as fx  # noqa: E402

import kforge  # noqa: E402
from kforge.triton.autotune import Autotuner  # noqa: E402


@pytest.fixture(autouse=True)
def fake_gpu(tmp_path, monkeypatch):
    from triton.runtime.driver import driver

    previous = driver._active
    fx.use_fake_driver()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    fx.Counters.launches = fx.Counters.benches = 0
    yield
    driver._active = previous


def tuned(configs=fx.CONFIGS, store=None, **kw):
    kw.setdefault("compile_workers", 2)
    return kforge.autotune(configs=configs, key=["n"], do_bench=fx.bench, store=store if store else False,
                           _launch=fx.launch, **kw)(fx.add_kernel)


def call(kernel, n=1000):
    x, y, out = fx.tensor(np.arange(n)), fx.tensor(np.ones(n)), fx.tensor(np.zeros(n))
    kernel[(1,)](x, y, out, n)
    return x, y, out


def cache_entries():
    root = Path(os.environ["TRITON_CACHE_DIR"])
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_it_wraps_like_triton_autotune():
    k = tuned()
    assert isinstance(k, Autotuner) and isinstance(k, triton.runtime.KernelInterface)
    assert k.arg_names == ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"]


def test_every_candidate_checked_the_fastest_correct_one_wins():
    k = tuned(budget=None, strategy="random")
    x, y, out = call(k)
    # (256, 2) is the fastest but wrong: it is never chosen, and never timed.
    assert (k.best_config.kwargs["BLOCK"], k.best_config.num_warps) == (128, 4)
    np.testing.assert_array_equal(out.a, x.a + y.a)
    report = next(iter(k.reports.values()))
    assert report["evaluations"] == 6
    assert fx.Counters.benches == 5
    statuses = {s for _, s, _ in report["trials"]}
    assert statuses == {"ok", "wrong_result"}
    assert any("wrong_result" in v for v in report["failed"].values())
    # The inputs the call passed are the ones it gets back.
    np.testing.assert_array_equal(x.a, np.arange(1000))


def test_the_compile_pool_fills_tritons_cache_and_the_jit_then_hits_it():
    k = tuned(budget=None, strategy="brute_force")
    call(k)
    report = next(iter(k.reports.values()))
    # The six configurations (and the reference, the first of them) compiled once each, in worker processes.
    assert report["compiles"] == 6
    entries = cache_entries()
    assert len(entries) >= 6
    # The JIT compiling a tuned configuration in this process finds it in the cache: nothing new is written.
    triton.knobs.runtime.jit_cache_hook = None
    x, y, out = fx.tensor(np.zeros(1000)), fx.tensor(np.zeros(1000)), fx.tensor(np.zeros(1000))
    compiled = fx.add_kernel.warmup(x, y, out, 1000, grid=(1,), **k.best_config.all_kwargs())
    assert compiled.asm["cubin"]
    assert cache_entries() == entries


def test_a_budget_searches_part_of_the_list():
    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128, 256, 512) for w in (1, 2, 4, 8)]
    times = {(b, w): 1.0 + abs(b - 256) / 256 + abs(w - 4) / 4 for b in (64, 128, 256, 512) for w in (1, 2, 4, 8)}
    saved = dict(fx.TIMES)
    fx.TIMES.update(times)
    try:
        k = tuned(configs=configs, budget=0.5, strategy="hybrid", seed=3)
        call(k)
    finally:
        fx.TIMES.clear()
        fx.TIMES.update(saved)
    report = next(iter(k.reports.values()))
    assert report["evaluations"] == 8 and len(report["trials"]) == 8
    assert report["candidates"] == 16


def test_a_python_strategy_class_steers_it():
    class Reverse:
        """Proposes the candidates from the last to the first."""

        def __init__(self, space, seed):
            self.order = space.valid()

        def propose(self, n):
            out, self.order = self.order[-n:][::-1], self.order[:-n] if n < len(self.order) else []
            return out

        def observe(self, trials):
            pass

    k = tuned(strategy=Reverse, budget=2)
    call(k)
    report = next(iter(k.reports.values()))
    assert [t[0] for t in report["trials"]] == [str(c) for c in (fx.CONFIGS[5], fx.CONFIGS[4])]


def test_early_prune_and_a_larger_space():
    prune = {"early_config_prune": lambda configs, nargs, **kw: [c for c in configs if c.num_warps == 4]}
    k = tuned(prune_configs_by=prune, budget=None)
    call(k)
    assert next(iter(k.reports.values()))["candidates"] == 3
    # space=: a cartesian space replaces the list (configs[0] stays the reference).
    k = tuned(space={"BLOCK": [64, 128, 256], "num_warps": [2, 4], "num_stages": [2, 3]}, budget=None,
              compile_workers=2)
    fx.TIMES.update({(b, w): t for (b, w), t in fx.TIMES.items()})
    call(k)
    report = next(iter(k.reports.values()))
    assert report["candidates"] == 12 and report["evaluations"] == 12


def test_a_second_process_starts_tuned_from_the_store(tmp_path):
    store = tmp_path / "store"
    k = tuned(store=store, budget=None)
    call(k)
    assert fx.Counters.benches == 5
    folders = list(store.glob("add_kernel-*/*"))
    assert len(folders) == 1
    run = kforge.open_run(folders[0])
    assert len(run) == 6 and run.meta("best")["values"]["BLOCK"] == 128
    # Another process, the same key: no benchmark, the same configuration.
    script = f"""
import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})
import numpy as np, kforge, autotune_fixture as fx
fx.use_fake_driver()
k = kforge.autotune(configs=fx.CONFIGS, key=["n"], do_bench=fx.bench, store={str(store)!r}, _launch=fx.launch)(fx.add_kernel)
x, y, out = fx.tensor(np.arange(1000)), fx.tensor(np.ones(1000)), fx.tensor(np.zeros(1000))
k[(1,)](x, y, out, 1000)
print(fx.Counters.benches, k.best_config.kwargs["BLOCK"], k.best_config.num_warps, next(iter(k.reports.values()))["from_store"])
"""
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "128", "4", "True"]
    # Another key tunes again.
    call(k, n=2000)
    assert len(list(store.glob("add_kernel-*/*"))) == 2


def test_a_reference_that_fails_to_compile_is_an_error():
    bad = [triton.Config({"BLOCK": 100}, num_warps=4)] + fx.CONFIGS  # arange needs a power of 2
    k = tuned(configs=bad)
    with pytest.raises(kforge.Error, match="reference configuration"):
        call(k)
