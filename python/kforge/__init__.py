"""kforge from Python: search spaces, ask/tell strategies, experiments, runs, scores, Python strategies, and
`kforge.autotune` for Triton kernels (docs/plugins.md).

    import kforge
    space = kforge.Space.from_t1("T1.json")
    s = kforge.strategy("hybrid", space, seed=1)
    cfgs = s.propose(8)
    s.observe([(c, measure(space.values(c))) for c in cfgs])

Importing kforge is cheap and needs neither Triton nor the native module: the native names (Space,
strategy, run, ...) load kforge._core on first use, and `kforge.triton` (the compile server, source operators)
never needs it. The native module is found next to this file (pip install), in $KFORGE_NATIVE_DIR, or in
<repo>/build/python/kforge (the README's build); without it, using a native name raises ImportError saying
how to build it.
"""
from __future__ import annotations

import os as _os
from pathlib import Path as _Path

_NATIVE = (
    "Error", "ConfigError", "Space", "Trial", "Strategy", "SearchState", "Experiment", "RunResult", "RunStore",
    "version", "strategy", "register_strategy", "strategies", "plugins", "load_plugin", "load_experiment",
    "experiment", "run", "score", "read_run",
)
__all__ = list(_NATIVE) + ["option", "UniformDraws", "open_run", "autotune", "native_available"]


def _native_dirs():
    """Where kforge._core may be, in the order looked at."""
    here = _Path(__file__).resolve().parent
    dirs = []
    if _os.environ.get("KFORGE_NATIVE_DIR"):
        dirs.append(_Path(_os.environ["KFORGE_NATIVE_DIR"]))
    dirs.append(here)
    dirs.append(here.parents[1] / "build" / "python" / "kforge")
    return dirs


def _find_native():
    for d in _native_dirs():
        if any(d.glob("_core.*.so")) or any(d.glob("_core.so")):
            if str(d) not in __path__:
                __path__.append(str(d))  # noqa: F821 (the package's own __path__)
            return d
    return None


_native = None
_find_native()  # puts the native module's folder on __path__ (so that `import kforge._core` works), loads nothing


def _load():
    global _native
    if _native is None:
        found = _find_native()
        if found is None:
            looked = ", ".join(str(d) for d in _native_dirs())
            raise ImportError(
                "kforge's native module (kforge._core) is not built: looked in " + looked + ". Build it with "
                "scripts/install-deps && scripts/build (it needs nanobind in <repo>/.venv), or pip install ."
            )
        from . import _core

        _native = _core
    return _native


def native_available() -> bool:
    """Whether kforge._core can be imported (without raising)."""
    try:
        _load()
        return True
    except ImportError:
        return False


def __getattr__(name):
    if name in _NATIVE:
        value = getattr(_load(), name)
        globals()[name] = value
        return value
    if name == "UniformDraws":
        from ._strategies import UniformDraws

        globals()["UniformDraws"] = UniformDraws
        return UniformDraws
    if name == "autotune":
        from .triton.autotune import autotune

        globals()["autotune"] = autotune
        return autotune
    raise AttributeError(f"module 'kforge' has no attribute {name!r}")


def option(type, default=None, doc="", *, min=None, max=None, choices=None, required=False):
    """Declares an option of a Python strategy class: options = {"k": kforge.option(int, 3, "what k is")}."""
    from ._strategies import option as _option

    return _option(type, default, doc, min=min, max=max, choices=choices, required=required)


def open_run(folder):
    """A run folder, read-only: trials, records, a pandas DataFrame, meta records (kforge.runs.Run)."""
    from .runs import Run

    return Run(folder)
