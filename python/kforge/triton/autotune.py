"""kforge.autotune: a drop-in for @triton.autotune that searches, compiles in parallel, checks and remembers.

    @kforge.autotune(configs=[triton.Config({"BLOCK_M": 128, ...}, num_warps=8, num_stages=3), ...],
                     key=["M", "N", "K"],                      # as triton.autotune
                     strategy="hybrid", budget=0.5, seed=0)    # kforge's: search half the list
    @triton.jit
    def matmul_kernel(...): ...

Same arguments as triton.autotune (configs, key, prune_configs_by, reset_to_zero, restore_value, pre_hook,
post_hook, do_bench, warmup, rep, cache_results), plus:

- ``space``: a larger space to search instead of the list: a kforge.Space or {name: [values]} whose names are
  the meta-parameters and num_warps / num_stages / num_ctas / maxnreg; configs[0] stays the reference.
- ``strategy`` (a registered name, default "hybrid", or a Python strategy class), ``budget`` (evaluations:
  an int, a fraction of the candidates, or None for all of them), ``seed``.
- ``store``: the folder of the run stores (default $KFORGE_AUTOTUNE_DIR or ~/.cache/kforge/autotune); False
  keeps nothing. One kforge run store per (kernel source, key values, candidates, strategy, seed, budget,
  GPU): a later process with the same key starts tuned, and a killed tuning continues where it stopped.
- ``compile_workers``: processes compiling candidates ahead of their benchmark (default min(8, cores)).
- ``check`` (default True), ``atol``, ``rtol``: every candidate's outputs (every tensor argument after one
  run from the same inputs) are compared with the first configuration's; a mismatch is a wrong_result trial,
  never chosen. Tensor arguments are restored after tuning, so the call that triggered it sees its inputs.

How a tuning goes (first call with a new key): the candidates (pruned as Triton prunes them) become a kforge
Space restricted to them; the strategy proposes a batch; each proposal's compile inputs are captured from
Triton's JIT (its own specialisation, through knobs.runtime.jit_cache_hook, without compiling) and compiled
by a process pool with triton.compile into Triton's cache; the JIT then finds each kernel there. Each
candidate is run once and checked, timed with do_bench (median), and told to the strategy, which proposes
the next batch. The fastest correct candidate is the key's configuration.
"""
from __future__ import annotations

import builtins
import concurrent.futures
import hashlib
import json
import math
import multiprocessing
import os
import sys
import time
from pathlib import Path

import triton
from triton import knobs
from triton.runtime.jit import JITFunction, KernelInterface

import kforge

_FIELDS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
# JIT functions by id, for compile workers forked from this process.
_FUNCTIONS: dict[int, JITFunction] = {}


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, pre_hook=None,
             post_hook=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None, cache_results=True, *,
             space=None, strategy="hybrid", budget=None, seed=0, store=None, compile_workers=None, check=True,
             atol=1e-2, rtol=1e-2, verbose=None, _launch=None):
    """The decorator (see the module's documentation). ``_launch(fn, args, kwargs)`` replaces the kernel's
    launch (tests without a GPU)."""

    def decorator(fn):
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                         post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results, space=space,
                         strategy=strategy, budget=budget, seed=seed, store=store, compile_workers=compile_workers,
                         check=check, atol=atol, rtol=rtol, verbose=verbose, launch=_launch)

    return decorator


# --- tensors, generically (torch on the GPU; numpy-backed stand-ins in tests) ------------------------------

def _is_tensor(x):
    return hasattr(x, "data_ptr") and hasattr(x, "dtype")


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _snapshot(x):
    return x.clone() if hasattr(x, "clone") else x.copy()


def _restore(dst, src):
    """Copies src's contents into dst (torch: copy_; other tensors: their copy_ or numpy.copyto)."""
    if hasattr(dst, "copy_"):
        dst.copy_(src)
    else:
        import numpy

        numpy.copyto(dst, src)


def _close(a, b, atol, rtol):
    """Whether tensor `a` matches reference `b` (NaN where the reference has NaN counts as equal)."""
    if _is_torch(a):
        import torch

        return bool(torch.allclose(a.float(), b.float(), atol=atol, rtol=rtol, equal_nan=True))
    import numpy

    return bool(numpy.allclose(numpy.asarray(a, dtype=numpy.float64), numpy.asarray(b, dtype=numpy.float64),
                               atol=atol, rtol=rtol, equal_nan=True))


# --- the compile pool ----------------------------------------------------------------------------------

def _compile_job(fn_id, module, qualname, specialization, target):
    """Runs in a worker: compiles one captured specialisation into Triton's cache. Returns (ok, seconds,
    error text)."""
    t0 = time.perf_counter()
    try:
        fn = _FUNCTIONS.get(fn_id)
        if fn is None:  # a spawned worker: the kernel by its import path
            import importlib

            obj = sys.modules.get(module) or importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
            fn = obj
        while not isinstance(fn, JITFunction):
            fn = fn.fn
        import triton.language as tl
        from triton.compiler import ASTSource

        data = json.loads(specialization)
        # What JITFunction.preload does, without the driver (the device belongs to the parent).
        constexprs = {
            tuple(k): (tl.dtype(v) if tl.dtype.is_dtype(v) else
                       tl.constexpr(v["constexpr"]) if isinstance(v, dict) and "constexpr" in v else v)
            for k, v in zip(data["constant_keys"], data["constant_vals"])
        }
        attrs = dict(zip(map(tuple, data["attrs_keys"]), data["attrs_vals"]))
        signature = {k: tuple(v) if isinstance(v, list) else v for k, v in data["signature"].items()}
        options = {k: tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
                   for k, v in data["options"].items()}
        triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options)
        return True, time.perf_counter() - t0, ""
    except Exception as e:  # a failing candidate is data
        return False, time.perf_counter() - t0, f"{type(e).__name__}: {e}"


class CompilePool:
    """Processes that compile captured specialisations into Triton's cache. Forked by default (the kernel's
    module needs no re-import; the workers never touch the GPU); KFORGE_AUTOTUNE_START=spawn starts fresh
    interpreters that import the kernel's module instead."""

    def __init__(self, workers):
        self.workers = max(1, int(workers))
        method = os.environ.get("KFORGE_AUTOTUNE_START", "fork")
        self.executor = concurrent.futures.ProcessPoolExecutor(self.workers,
                                                               mp_context=multiprocessing.get_context(method))

    def submit(self, fn, specialization, target):
        fn_id = id(fn)
        _FUNCTIONS[fn_id] = fn
        return self.executor.submit(_compile_job, fn_id, fn.fn.__module__, fn.fn.__qualname__, specialization,
                                    target)

    def close(self):
        self.executor.shutdown(wait=True, cancel_futures=True)


# --- the autotuner -------------------------------------------------------------------------------------

def _config_values(cfg):
    """A triton.Config as {name: value}: its kwargs, then num_warps, num_stages, num_ctas, maxnreg (0: unset)."""
    values = dict(cfg.kwargs)
    for f in _FIELDS:
        v = getattr(cfg, f, None)
        values[f] = 0 if v is None and f == "maxnreg" else v
    return values


def _config_from_values(values):
    kwargs = {k: v for k, v in values.items() if k not in _FIELDS}
    fields = {f: values[f] for f in _FIELDS if f in values}
    if fields.get("maxnreg") == 0:
        fields["maxnreg"] = None
    return triton.Config(kwargs, **fields)


class Autotuner(KernelInterface):
    """What kforge.autotune wraps a @triton.jit function in (a KernelInterface: kernel[grid](...))."""

    def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook=None, post_hook=None,
                 prune_configs_by=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None,
                 cache_results=True, space=None, strategy="hybrid", budget=None, seed=0, store=None,
                 compile_workers=None, check=True, atol=1e-2, rtol=1e-2, verbose=None, launch=None):
        if not configs and space is None:
            configs = [triton.Config({}, num_warps=4, num_stages=3, num_ctas=1)]
        self.fn = fn
        self.jit = fn
        while not isinstance(self.jit, JITFunction):
            self.jit = self.jit.fn
        self.arg_names = list(arg_names)
        self.configs = list(configs or [])
        self.keys = list(key)
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.user_pre_hook, self.user_post_hook = pre_hook, post_hook
        prune = prune_configs_by or {}
        self.perf_model = prune.get("perf_model")
        self.top_k = prune.get("top_k", 1.0)
        self.early_config_prune = prune.get("early_config_prune")
        if use_cuda_graph or warmup is not None or rep is not None:
            import triton.testing

            if use_cuda_graph:
                do_bench = lambda call, quantiles: triton.testing.do_bench_cudagraph(  # noqa: E731
                    call, rep=rep if rep is not None else 100, quantiles=quantiles)
            elif do_bench is None:
                do_bench = lambda call, quantiles: triton.testing.do_bench(  # noqa: E731
                    call, warmup=warmup if warmup is not None else 25, rep=rep if rep is not None else 100,
                    quantiles=quantiles)
        self._do_bench = do_bench
        self.space_arg = space
        self.strategy = strategy
        self.budget = budget
        self.seed = seed
        self.cache_results = cache_results
        if store is None:
            store = os.environ.get("KFORGE_AUTOTUNE_DIR") or Path.home() / ".cache" / "kforge" / "autotune"
        self.store_root = Path(store) if store not in (False, "") and cache_results else None
        self.compile_workers = compile_workers or min(8, os.cpu_count() or 1)
        self.check, self.atol, self.rtol = check, atol, rtol
        self.verbose = knobs.autotuning.print if verbose is None else verbose
        self.launch = launch
        self.cache = {}        # key -> triton.Config
        self.reports = {}      # key -> what the tuning did (times, trials, best, store folder)
        self.best_config = None
        self.nargs = None

    # -- triton.autotune's interface --

    @property
    def do_bench(self):
        if self._do_bench is None:
            from triton.runtime.driver import driver

            return driver.active.get_benchmarker()
        return self._do_bench

    def _tuning_key(self, args, kwargs):
        all_args = {**dict(zip(self.arg_names, args)), **kwargs}
        named = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        return tuple(key)

    def prune_configs(self, kwargs, candidates):
        pruned = candidates
        if self.early_config_prune:
            pruned = self.early_config_prune(candidates, self.nargs, **kwargs)
            if not pruned:
                raise kforge.ConfigError("early_config_prune returned no configuration")
        if self.perf_model:
            top_k = self.top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(candidates) * top_k))
            if len(pruned) > top_k:
                est = {c: self.perf_model(**self.nargs, **kwargs, **c.all_kwargs()) for c in pruned}
                pruned = sorted(est, key=est.get)[:top_k]
        return list(pruned)

    def run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        key = self._tuning_key(args, kwargs)
        if key not in self.cache:
            self.cache[key] = self._tune(key, args, kwargs)
        config = self.cache[key]
        self.best_config = config
        full = {**self.nargs, **kwargs, **config.all_kwargs()}
        if config.pre_hook is not None:
            config.pre_hook(full)
        ret = self._call(args, kwargs, config)
        self.nargs = None
        return ret

    def warmup(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        out = [self.fn.warmup(*args, **kwargs, **c.all_kwargs()) for c in self.prune_configs(kwargs, self._candidates()[0])]
        self.nargs = None
        return out

    # -- the search --

    def _candidates(self):
        """(candidate triton.Configs, the reference config)."""
        reference = self.configs[0] if self.configs else None
        if self.space_arg is None:
            seen, out = set(), []
            for c in self.configs:
                k = tuple(sorted(_config_values(c).items()))
                if k not in seen:
                    seen.add(k)
                    out.append(c)
            return out, reference
        space = self.space_arg if isinstance(self.space_arg, kforge.Space) else kforge.Space(dict(self.space_arg))
        out = [_config_from_values(space.values(c)) for c in space.valid()]
        return out, reference or out[0]

    def _space(self, candidates):
        """A kforge Space whose valid configurations are exactly the candidates, and the Config of each."""
        rows = [_config_values(c) for c in candidates]
        names = list(rows[0])
        if any(list(r) != names for r in rows) or any(v is None for r in rows for v in r.values()):
            # Configurations with different keys: one parameter, the position in the list.
            space = kforge.Space({"config": list(range(len(candidates)))})
            return space, {(i,): c for i, c in enumerate(candidates)}
        params = {n: sorted({r[n] for r in rows}, key=lambda v: (str(type(v)), v)) for n in names}
        space = kforge.Space(params, configs=[dict(r) for r in rows])
        return space, {space.config(r): c for r, c in zip(rows, candidates)}

    def _store_folder(self, key, space, candidates):
        if self.store_root is None:
            return None
        ident = {
            "key": repr(key), "candidates": [str(c) for c in candidates], "strategy": str(self.strategy),
            "seed": self.seed, "budget": self.budget, "check": self.check, "device": _device_name(),
        }
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]
        return self.store_root / f"{self.jit.__name__}-{self.jit.cache_key[:12]}" / digest

    def _evaluations(self, n):
        if self.budget is None:
            return n
        if isinstance(self.budget, float) and 0 < self.budget <= 1:
            return max(1, math.ceil(self.budget * n))
        if isinstance(self.budget, int) and self.budget >= 1:
            return min(n, self.budget)
        raise kforge.ConfigError(f"budget must be None, a whole number >= 1 or a fraction in (0, 1], not {self.budget!r}")

    def _call(self, args, kwargs, config):
        current = {**kwargs, **config.all_kwargs()}
        if self.launch is not None:
            return self.launch(self.fn, args, current)
        return self.fn.run(*args, **current)

    def _capture(self, args, kwargs, config):
        """The specialisation the JIT would compile for `config` (its JSON), or None when the JIT has the
        kernel already; compiles nothing."""
        got = []

        def hook(**kw):
            got.append(kw["compile"]["specialization_data"])
            return True  # do not compile here

        previous = knobs.runtime.jit_cache_hook
        knobs.runtime.jit_cache_hook = hook
        meta = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}  # kernel[grid](...) passes them
        try:
            self.jit.run(*args, grid=None, warmup=True, **meta, **config.all_kwargs())
        finally:
            knobs.runtime.jit_cache_hook = previous
        return got[0] if got else None

    def _tune(self, key, args, kwargs):
        t_start = time.perf_counter()
        if self.early_config_prune or self.perf_model:
            candidates = self.prune_configs(kwargs, self._candidates()[0])
            reference = self._candidates()[1]
        else:
            candidates, reference = self._candidates()
        if self.configs and len(self.configs) == 1 and self.space_arg is None:
            return self.configs[0]  # nothing to choose (triton.autotune does not benchmark either)
        space, by_config = self._space(candidates)
        n_eval = self._evaluations(len(candidates))
        folder = self._store_folder(key, space, candidates)
        store, stored = None, {}
        if folder is not None:
            store = kforge.RunStore(str(folder), "w")
            best = store.meta("best")
            if best is not None and store.meta("autotune") is not None:
                config = by_config.get(tuple(best["config"]))
                if config is not None:
                    self.reports[key] = {"from_store": True, "folder": str(folder), "best": str(config),
                                         "best_ms": best["time_ms"], "total_s": time.perf_counter() - t_start}
                    if self.verbose:
                        print(f"kforge.autotune {self.jit.__name__} {key}: {config} from {folder}")
                    return config
            if len(store) == 0:
                store.set_space(space)
            # A tuning that stopped part way: its trials stand in for re-measurement (same seed, same proposals).
            stored = {t.config: t for t in store.trials()}
            store.set_meta("autotune", {"kernel": self.jit.__name__, "key": repr(key), "strategy": str(self.strategy),
                                        "seed": self.seed, "budget": n_eval, "candidates": len(candidates)})

        named = {**dict(zip(self.arg_names, args)), **kwargs}
        tensors = {n: v for n, v in named.items() if _is_tensor(v)}
        pristine = {n: _snapshot(v) for n, v in tensors.items()} if self.check else {}
        strat = kforge.strategy(self.strategy, space, seed=self.seed, budget=n_eval)
        pool = CompilePool(self.compile_workers)
        target = _target()
        report = {"folder": str(folder) if folder else None, "candidates": len(candidates), "evaluations": 0,
                  "compile_wall_s": 0.0, "compile_cpu_s": 0.0, "bench_s": 0.0, "failed": {}, "from_store": False}
        reference_out = None
        try:
            batch = max(2, 2 * self.compile_workers)
            while True:
                proposed = strat.propose(batch)
                if not proposed:
                    break
                todo = [c for c in proposed if c not in stored]
                configs = {c: by_config[c] for c in todo}
                if reference_out is None and self.check and reference is not None:
                    configs.setdefault("reference", reference)
                # Compile the batch in parallel (what the JIT would compile, captured without compiling).
                t0 = time.perf_counter()
                futures, by_spec = {}, {}
                for c, cfg in configs.items():
                    spec = self._capture(args, kwargs, cfg)
                    if spec is not None:  # None: the JIT holds this kernel already
                        if spec not in by_spec:
                            by_spec[spec] = pool.submit(self.jit, spec, target)
                        futures[c] = by_spec[spec]
                compiled = {c: f.result() for c, f in futures.items()}
                report["compile_wall_s"] += time.perf_counter() - t0
                report["compile_cpu_s"] += sum(f.result()[1] for f in by_spec.values())
                report["compiles"] = report.get("compiles", 0) + len(by_spec)
                if reference_out is None and self.check and reference is not None:
                    ok, _, err = compiled.get("reference", (True, 0, ""))
                    if not ok:
                        raise kforge.Error(f"the reference configuration ({reference}) does not compile: {err}")
                    reference_out = self._reference(args, kwargs, reference, tensors, pristine)
                trials = []
                for c in proposed:
                    if c in stored:
                        trials.append(stored[c])
                        continue
                    ok, seconds, err = compiled.get(c, (True, 0.0, ""))
                    t = (self._measure(c, args, kwargs, by_config[c], tensors, pristine, reference_out) if ok else
                         kforge.Trial(c, status="compile_failed", error=err))
                    if not t.ok:
                        report["failed"][str(by_config[c])] = f"{t.status}: {t.error[:200]}"
                    trials.append(t)
                strat.observe(trials)
                report["evaluations"] += len(todo)
                if store is not None and todo:
                    store.commit([t for c, t in zip(proposed, trials) if c not in stored])
        finally:
            pool.close()
            for n, v in tensors.items():  # the caller's call sees its own inputs
                if n in pristine:
                    _restore(v, pristine[n])
        best = strat.best
        if best is None:
            raise kforge.Error(f"kforge.autotune: no configuration of {self.jit.__name__} ran correctly for key {key}: "
                               f"{report['failed']}")
        config = by_config[best.config]
        report.update(best=str(config), best_ms=best.time_ms, total_s=time.perf_counter() - t_start,
                      trials=[(str(by_config[t.config]), t.status, t.time_ms) for t in strat.trials])
        self.reports[key] = report
        if store is not None:
            store.set_meta("best", {"config": list(best.config), "time_ms": best.time_ms, "values": space.values(best.config)})
            store.set_meta("finished", {"reason": "budget", "trials": len(strat.trials)})
        if self.verbose:
            print(f"kforge.autotune {self.jit.__name__} {key}: {report['evaluations']} of {len(candidates)} "
                  f"candidates in {report['total_s']:.2f} s (compile {report['compile_wall_s']:.2f} s wall); "
                  f"best {config} at {best.time_ms:.4f} ms")
        return config

    def _run_once(self, args, kwargs, config, tensors, pristine):
        """Runs `config` once from the pristine inputs (hooks as Triton's autotuner calls them)."""
        for n in tensors:
            if n in pristine:
                _restore(tensors[n], pristine[n])
        full = {**dict(zip(self.arg_names, args)), **kwargs, **config.all_kwargs()}
        self._pre(full, config)
        try:
            self._call(args, kwargs, config)
        except Exception as e:
            self._post(full, e)
            raise
        self._post(full, None)
        _sync()

    def _reference(self, args, kwargs, config, tensors, pristine):
        self._run_once(args, kwargs, config, tensors, pristine)
        return {n: _snapshot(v) for n, v in tensors.items()}

    def _measure(self, c, args, kwargs, config, tensors, pristine, reference_out):
        """One candidate: a checked run, then do_bench's median. Failures are trials with a status."""
        try:
            if reference_out is not None:
                self._run_once(args, kwargs, config, tensors, pristine)
                bad = [n for n in tensors if not _close(tensors[n], reference_out[n], self.atol, self.rtol)]
                if bad:
                    return kforge.Trial(c, status="wrong_result",
                                        error=f"differs from the first configuration's output in {', '.join(bad)}")
            full = {**dict(zip(self.arg_names, args)), **kwargs, **config.all_kwargs()}

            def kernel_call():
                self._pre(full, config)
                try:
                    self._call(args, kwargs, config)
                except Exception as e:
                    self._post(full, e)
                    raise
                self._post(full, None)

            t0 = time.perf_counter()
            times = self.do_bench(kernel_call, quantiles=(0.5, 0.2, 0.8))
            self.bench_seconds = time.perf_counter() - t0
            times = list(times) if isinstance(times, (list, tuple)) else [times]
            if not math.isfinite(times[0]):
                return kforge.Trial(c, status="launch_failed", error="do_bench returned no time")
            return kforge.Trial(c, time_ms=float(times[0]), times_ms=[float(x) for x in times])
        except Exception as e:  # OutOfResources and other launch failures: a failing variant
            return kforge.Trial(c, status="launch_failed", error=f"{type(e).__name__}: {e}")

    def _pre(self, full, config):
        if config.pre_hook:
            config.pre_hook(full)
        if self.user_pre_hook:
            self.user_pre_hook(full)
        else:
            for n in self.reset_to_zero:
                full[n].zero_()
            self._restore_copies = {n: _snapshot(full[n]) for n in self.restore_value}

    def _post(self, full, exception):
        if self.user_post_hook:
            self.user_post_hook(full, exception)
        else:
            for n in self.restore_value:
                _restore(full[n], self._restore_copies[n])
            self._restore_copies = {}


def _target():
    from triton.runtime.driver import driver

    return driver.active.get_current_target()


def _device_name():
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except Exception:
        pass
    return str(_target())


def _sync():
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except ImportError:
        pass
