"""A TritonBench-G operator's speed harness as a program problem's inputs and call adapter.

TritonBench-G's ``perf/<op>_perf.py`` defines ``performance_metrics`` with ``get_input_tensors()`` (a
sweep of sizes into ``self.input_tensors``), ``to_cuda(input)`` and ``call_op(input)``, which calls the
operator's wrapper imported as ``from TritonBench_v1.<op> import ...``. kforge measures the harness's own
call: each shape is ONE argument, ``to_cuda(input)``, and the callable is ``call_op`` with the names it
imported from the operator rebound to the variant's module for the duration of the call.

The generated ``harness.py`` of an operator (kforge.tritonbench_g.importer) is a few lines::

    from kforge.tritonbench_g.harness import operator, search_shapes
    def shapes(): return search_shapes("/data/tritonbench-g", "add_example", "spread:3")
    def all_shapes(): return operator("/data/tritonbench-g", "add_example").shapes("all")
    def bind(module): return operator("/data/tritonbench-g", "add_example").bind(module)

Contract:
- The operator's package ``TritonBench_v1`` is made in ``sys.modules`` (a namespace over ``kernels/``) and
  ``TritonBench_v1.<op>`` is the operator's source cut at its test block (the line of ``#``), so importing
  the harness neither runs the test block nor needs the data laid out as the benchmark's repository.
- ``shapes(selection)`` returns the selected sizes' ``(to_cuda(input),)`` calls, in the harness's order.
  Selection ``"all"``, ``"spread:N"`` (N sizes spread from the smallest to the largest) or comma-separated
  indices into the sweep (negative from the end).
- ``bind(module)`` returns ``call(input)``: ``call_op(input)`` with every global of the harness that IS an
  attribute of the operator's original module replaced by the variant's attribute of the same name.
- One ``Operator`` per (data, op) per process (``operator``), so ``shapes`` and ``bind`` share the harness.
- ``search_shapes`` (a search worker's inputs): the harness makes every size of its sweep before the
  worker keeps the selected ones (on the GPU, the worker's inputs context, where the harness names no
  device), so the processes of a machine make them one at a time (``inputs_lock``): fast_rope_embedding's
  sweep is 34 GB, and four workers making it at once ran out of memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import importlib.util
import os
import sys
import tempfile
import types

END_MARKER = "#####"  # each operator's test block follows a line of 146 '#' (the data's README)
PACKAGE = "TritonBench_v1"


def cut_source(source: str, marker: str = END_MARKER) -> str:
    """The operator as kforge's program worker cuts it (kforge.triton.program_worker.cut_program)."""
    from kforge.triton.program_worker import cut_program
    return cut_program(source, marker)


def parse_selection(selection: str, count: int) -> list[int]:
    """Indices into a sweep of ``count`` sizes: "all", "spread:N" or "0,7,-1" (deduplicated, in order)."""
    if selection.startswith("spread:"):
        selection = spread_selection(count, int(selection.split(":", 1)[1]))
    if selection == "all":
        return list(range(count))
    picked = set()
    for part in selection.split(","):
        i = int(part)
        if not -count <= i < count:
            raise IndexError(f"size index {i}: the harness sweeps {count} sizes")
        picked.add(i % count)
    return sorted(picked)


def spread_selection(count: int, n: int = 3) -> str:
    """``n`` indices spread over a sweep of ``count`` sizes: the smallest, the largest, between them."""
    if count <= n:
        return "all"
    idx = sorted({round(k * (count - 1) / (n - 1)) for k in range(n)})
    return ",".join(map(str, idx))


class Operator:
    """One operator's harness, loaded once per process."""

    def __init__(self, data_dir: str, op: str):
        self.data_dir, self.op = data_dir, op
        self.original = self._install_original()
        self.perf_module = self._load_perf()
        self.perf = self.perf_module.performance_metrics()
        self.perf.get_input_tensors()
        self.inputs = list(self.perf.input_tensors)
        own = vars(self.original)
        self.imported = {name: value for name, value in vars(self.perf_module).items()
                         if not name.startswith("__") and not isinstance(value, types.ModuleType)
                         and value is not None and own.get(name) is value}

    # -- loading
    def _install_original(self) -> types.ModuleType:
        kernels = os.path.join(self.data_dir, "kernels")
        if PACKAGE not in sys.modules:
            package = types.ModuleType(PACKAGE)
            package.__path__ = [kernels]
            sys.modules[PACKAGE] = package
        name = f"{PACKAGE}.{self.op}"
        path = os.path.join(kernels, self.op + ".py")
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) == path:
            return sys.modules[name]
        with open(path, encoding="utf-8") as f:
            source = cut_source(f.read())
        module = types.ModuleType(name)
        module.__file__ = path  # Triton's JIT reads the kernels' source lines from here (the same lines)
        sys.modules[name] = module
        try:
            exec(compile(source, path, "exec"), module.__dict__)
        except BaseException:
            del sys.modules[name]
            raise
        setattr(sys.modules[PACKAGE], self.op, module)
        return module

    def _load_perf(self) -> types.ModuleType:
        perf_dir = os.path.join(self.data_dir, "perf")
        if perf_dir not in sys.path:
            sys.path.append(perf_dir)  # performance_utils
        path = os.path.join(perf_dir, self.op + "_perf.py")
        spec = importlib.util.spec_from_file_location(f"tritonbench_g_perf_{self.op}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    # -- the program problem's inputs and adapter
    def selected(self, selection: str) -> list[int]:
        return parse_selection(selection, len(self.inputs))

    def shapes(self, selection: str = "all", release_others: bool = False) -> list[tuple]:
        """The selected sizes' calls. ``release_others``: the harness made every size's inputs (often on the
        GPU); the other sizes' are dropped, so a search worker holds only what it checks and times (two
        workers per GPU holding all ten sizes of attention_fwd_triton1 ran the H200 out of memory); a later
        selection of a released size makes the harness's inputs again (from the RNG's state then: the
        program worker seeds before each inputs function)."""
        chosen = self.selected(selection)
        if any(self.inputs[i] is None for i in chosen):  # released earlier: the harness makes them again
            self.perf.input_tensors = []  # (many harnesses' get_input_tensors only append to it)
            self.perf.get_input_tensors()
            self.inputs = list(self.perf.input_tensors)
        calls = [(self.perf.to_cuda(self.inputs[i]),) for i in chosen]
        if release_others:
            self.inputs = [x if i in chosen else None for i, x in enumerate(self.inputs)]
            self.perf.input_tensors = list(self.inputs)
            gc.collect()
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available():
                torch.cuda.empty_cache()
        return calls

    def bind(self, module):
        """``call(input)``: the harness's ``call_op`` on the variant ``module``."""
        patch = {}
        for name in self.imported:
            if not hasattr(module, name):
                raise AttributeError(f"the variant has no {name!r} (the harness imports it)")
            patch[name] = getattr(module, name)
        g = vars(self.perf_module)
        perf, original = self.perf, dict(self.imported)

        def call(inp):
            g.update(patch)
            try:
                return perf.call_op(inp)
            finally:
                g.update(original)

        return call


@functools.lru_cache(maxsize=None)
def operator(data_dir: str, op: str) -> Operator:
    return Operator(data_dir, op)


@contextlib.contextmanager
def inputs_lock(path: str | None = None):
    """Held while a process makes a harness's whole sweep and drops what it does not keep: one process of
    the machine at a time (an advisory lock on a file; $KFORGE_INPUTS_LOCK or one under the temporary
    folder), so the machine holds at most one sweep beside the sizes the workers kept (on the GPU where the
    harness makes its tensors without a device: the program worker's inputs context is the GPU)."""
    path = path or os.environ.get("KFORGE_INPUTS_LOCK") or os.path.join(tempfile.gettempdir(),
                                                                         "kforge-tritonbench-g-inputs.lock")
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def search_shapes(data_dir: str, op: str, selection: str) -> list[tuple]:
    """A search worker's inputs: ``operator(data_dir, op).shapes(selection, release_others=True)``, the
    sweep made under ``inputs_lock``."""
    with inputs_lock():
        return operator(data_dir, op).shapes(selection, release_others=True)
