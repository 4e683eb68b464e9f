"""Python strategies: loading a strategy class from a module, and the options it declares.

Called by kforge's native module (python/src/module_strategy.cpp); users write classes (docs/plugins.md):

    class MyStrategy:
        \"\"\"One line: what it is.\"\"\"
        options = {"step": kforge.option(int, 1, "how far a move goes", min=1)}

        def __init__(self, space, seed, step): ...      # space: kforge.Space; seed: int; options by name
        def propose(self, n): ...                        # or propose(self, n, state): up to n configurations
        def observe(self, trials): ...                   # kforge.Trial objects of its proposals (and first of
                                                         # the run's start configurations), in order
        def finished(self): ...                          # optional

Contract of the functions here: errors are Python exceptions whose message says what is wrong and where
(LookupError for a class the module lacks, ImportError/OSError for a module that does not load, TypeError or
ValueError for ill-declared options); kforge turns them into config errors at the right key.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import random
import re
import sys

_TYPE_NAMES = {int: "integer", float: "real", bool: "boolean", str: "string", list: "list", dict: "object"}
_KNOWN_TYPES = {"integer", "real", "boolean", "string", "list", "object", "any"}
_FIELDS = {"type", "default", "doc", "min", "max", "choices", "required"}
_loaded: dict[tuple[str, float], object] = {}


def option(type, default=None, doc="", *, min=None, max=None, choices=None, required=False):
    """Declares one option of a strategy class (its `options` dict maps names to these).

    type: int, float, bool, str, list, dict (or their kforge names integer, real, boolean, string, list,
    object, any); default: the value when the config gives none (None and required=False: "not set");
    min/max: inclusive bounds of numbers; choices: the allowed strings.
    """
    name = _TYPE_NAMES.get(type, type)
    if name not in _KNOWN_TYPES:
        raise TypeError(f"option type {type!r} is not one of int, float, bool, str, list, dict")
    return {"type": name, "default": default, "doc": doc, "min": min, "max": max,
            "choices": list(choices) if choices else None, "required": bool(required)}


def _config_dir(file: str) -> str:
    """The folder a config's relative paths start from: the config file's (its ':line' suffix removed)."""
    path = re.sub(r":\d+$", "", file or "")
    if path and os.path.exists(path):
        return os.path.dirname(os.path.abspath(path))
    return os.getcwd()


def _load_file(path: str):
    """The module in file `path`, imported once per (path, modification time) under a unique name."""
    stamp = os.stat(path).st_mtime
    key = (path, stamp)
    if key not in _loaded:
        digest = hashlib.sha256(path.encode()).hexdigest()[:12]
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        name = f"kforge_user_{stem}_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        _loaded[key] = module
    return _loaded[key]


def load_class(module: str, name: str, config_file: str = ""):
    """The class `name` of `module`: a .py file (relative paths from the config file's folder) or a module
    name importable from sys.path."""
    if module.endswith(".py") or os.sep in module:
        path = module if os.path.isabs(module) else os.path.join(_config_dir(config_file), module)
        path = os.path.normpath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no Python file {path}")
        try:
            mod = _load_file(path)
        except Exception as e:
            raise ImportError(f"importing {path} failed: {type(e).__name__}: {e}") from e
    else:
        try:
            mod = importlib.import_module(module)
        except Exception as e:
            raise ImportError(f"importing module {module} failed: {type(e).__name__}: {e}") from e
    cls = getattr(mod, name, None)
    if cls is None:
        raise LookupError(f"{module} has no class {name}")
    check_class(cls)
    return cls


def check_class(cls) -> None:
    """Raises TypeError unless `cls` is a class with propose and observe methods."""
    if not inspect.isclass(cls):
        raise TypeError(f"{cls!r} is not a class")
    for method in ("propose", "observe"):
        if not callable(getattr(cls, method, None)):
            raise TypeError(f"strategy class {cls.__qualname__} has no {method}() method")


def declared_options(cls) -> list[dict]:
    """The options `cls` declares in its `options` attribute, as dicts with name, type, default, doc, min,
    max, choices, required. A plain value instead of option(...) declares an option of its type."""
    check_class(cls)
    declared = getattr(cls, "options", None) or {}
    if not isinstance(declared, dict):
        raise TypeError(f"{cls.__qualname__}.options must be a dict {{name: kforge.option(...)}}")
    out = []
    for name, spec in declared.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"option name {name!r} of {cls.__qualname__} is not an identifier")
        if isinstance(spec, dict) and "type" in spec and set(spec) <= _FIELDS:
            entry = dict(option("any"), **spec)
            entry["type"] = _TYPE_NAMES.get(entry["type"], entry["type"])
            if entry["type"] not in _KNOWN_TYPES:
                raise TypeError(f"option {name} of {cls.__qualname__}: unknown type {spec['type']!r}")
        else:
            kind = _TYPE_NAMES.get(type(spec))
            if kind is None:
                raise TypeError(f"option {name} of {cls.__qualname__}: declare it with kforge.option(type, default, doc)")
            entry = option(kind, spec)
        entry["name"] = name
        out.append(entry)
    return out


def takes_state(method) -> bool:
    """Whether a bound propose method takes (n, state) rather than (n)."""
    try:
        params = [p for p in inspect.signature(method).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2


def summary(cls) -> str:
    """The first line of the class's docstring, or its name."""
    doc = inspect.getdoc(cls) or ""
    return doc.strip().splitlines()[0] if doc.strip() else f"Python strategy {cls.__qualname__}"


class UniformDraws:
    """Seeded uniform draws of valid configurations for a strategy, never one in ``skip``.

    Where the space can be listed (``space.enumerable`` and at most ``LIST_LIMIT`` valid configurations), a
    permutation of ``space.valid()`` shuffled by ``random.Random(seed)``, drawn without replacement; otherwise
    (a space too large to list: TritonBench-G's chunk_gla_fwd has 5.3e8 combinations) seeded draws from
    ``space.sample`` that skip what ``skip`` holds. ``next(skip)``: a configuration tuple, or None when the
    listed space is used up, or ``tries`` draws of a large one found nothing outside ``skip`` (or its sampler
    found no valid configuration at all). ``total``: the valid count of a listed space, None for a sampled
    one (it is never used up)."""

    LIST_LIMIT = 1_000_000

    def __init__(self, space, seed: int, tries: int = 1000):
        self.space, self.tries = space, tries
        self.rng = random.Random(seed)
        listed = space.enumerable and space.size <= self.LIST_LIMIT
        self.total = space.size if listed else None
        self.order = space.valid() if listed else None
        if listed:
            self.rng.shuffle(self.order)

    def next(self, skip):
        if self.order is not None:
            while self.order:
                c = self.order.pop()
                if c not in skip:
                    return c
            return None
        for _ in range(self.tries):
            try:
                c = tuple(self.space.sample(1, seed=self.rng.getrandbits(63))[0])
            except Exception:  # kforge.Error: no valid configuration found in its draws (a sparse space)
                return None
            if c not in skip:
                return c
        return None

