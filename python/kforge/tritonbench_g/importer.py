"""TritonBench-G's operators as kforge program-level problems, without hand edits (issue 12, item 1).

    python -m kforge.tritonbench_g.importer DATA --out CAMPAIGN [--ops a,b] [--seconds 30] [--exclude FILE]

DATA is ../shared/data/tritonbench-g (read where it is; nothing is copied). For each operator
``kernels/<op>.py`` with its harness ``perf/<op>_perf.py`` it writes ``CAMPAIGN/<op>/``:

- ``harness.py``: the inputs (``shapes``: the harness's sweep, ``spread:3`` = the smallest, the largest
  and one between; ``all_shapes``: every size) and the adapter (``bind``) of kforge.tritonbench_g.harness;
- ``kforge.json`` and ``random.json``: experiments (JSON is YAML) for ``kforge run``: the program cut at
  its test block, the knobs ``source_ops.find_knobs`` finds (constexpr arguments at launch sites, literals
  and parameter defaults in the wrapper, launch keywords, autotune lists, heuristics) that can take effect
  under the harness (``operator_parameters``: not in code it never runs, not a default every call
  passes) as parameters with their suggested values,
  the largest selected size timed (TritonBench's metric sums times over sizes: the largest sizes weigh
  most), all selected sizes checked; both searches start from the problem's default configuration
  (``start: default``: the values the source writes or Triton implies, a computed launch option as
  the source computes it (source_ops.AS_WRITTEN); for an ``@triton.autotune`` kernel its list's entries,
  up to program_worker.START_LIMIT configurations in all), then the
  default strategy (hybrid) or random search; a wall-time budget
  that counts the workers' start-up (``wall_includes_setup``) with a 1 s grace; a candidate's compile
  bounded by a third of the budget (``compile_timeout_s``: a longer one is a ``timeout`` trial).

and ``CAMPAIGN/index.json``: one record per operator: ``status`` ``ready``, ``no_knob`` (nothing to turn:
no experiment is written), ``excluded`` (by the exclusion file, with its reason) or ``error`` (the source
does not parse), the call, the parameter count and the source length (``output_triton_len``).

No per-operator hints: the only per-operator input is the exclusion file (JSON ``{"op": "reason"}``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kforge.tritonbench_g.harness import END_MARKER, PACKAGE, cut_source  # noqa: E402
from kforge.triton import source_ops  # noqa: E402
from kforge.triton.program_worker import knobs_as_parameters, start_configurations  # noqa: E402

SEARCH_SIZES = "spread:3"
# The program evaluator's options for every operator (docs: kforge plugins program).
EVALUATOR = {"type": "program", "params": {"max_timing_seconds": 0.5, "workers_per_device": 2}}
# Worker processes on the GPU (``--workers``; the campaign's first chunks used 2). Each compiles its own
# candidates on a core and takes the GPU's lock to check and, alone, to time: a Triton operator's search
# is compile-bound (0.2-7 s a candidate on the H200 machine, against 0.3-1 s of GPU work), so more
# workers make more trials in the same wall time, at the cost of one CUDA context and one set of
# inputs each in GPU memory.
DEFAULT_WORKERS = EVALUATOR["params"]["workers_per_device"]
# A candidate's compile may take at most this share of the budget (and at least MIN_COMPILE_S): the
# importer's doubled block sizes include tiles whose compile outlasts a 30 s search (attention_llama's
# BLOCK 256-1024: 38 s to over 240 s on one core here), and a worker in such a compile searches nothing.
COMPILE_SHARE = 1 / 3
MIN_COMPILE_S = 5.0


def evaluator(seconds: float, workers: int = DEFAULT_WORKERS) -> dict:
    """The program evaluator for a search of ``seconds`` of wall time with ``workers`` on the GPU."""
    params = dict(EVALUATOR["params"], workers_per_device=workers,
                  compile_timeout_s=max(MIN_COMPILE_S, round(seconds * COMPILE_SHARE, 1)))
    return {"type": EVALUATOR["type"], "params": params}


def operators(data_dir: str) -> list[str]:
    """The operators that have both a kernel file and a speed harness, sorted."""
    kernels = {f[:-3] for f in os.listdir(os.path.join(data_dir, "kernels")) if f.endswith(".py")}
    perf = {f[:-8] for f in os.listdir(os.path.join(data_dir, "perf")) if f.endswith("_perf.py")}
    return sorted(kernels & perf)


def harness_call(perf_source: str, op: str) -> list[str]:
    """The names the harness imports from ``TritonBench_v1.<op>`` (the first is the problem's call)."""
    for node in ast.walk(ast.parse(perf_source)):
        if isinstance(node, ast.ImportFrom) and node.module == f"{PACKAGE}.{op}":
            return [a.name for a in node.names]
    return []


def passed_arguments(perf_source: str, op: str, source: str) -> dict[str, set[str]]:
    """The parameters of the operator's functions that every call of them passes, by qualified name. The
    calls: the harness's of a name it imports from the operator (``wrapper(x, 1024)``; ``import ... as``
    followed) and the module's own of its functions, each by name, by a class's ``apply`` (an autograd
    Function: its ``forward``, after ``ctx`` where forward takes one) or by a module-level alias of
    either (``layer_norm = LayerNorm.apply``); a call passes the parameters its positional arguments fill
    and its keywords name (a ``*args`` or ``**kwargs`` may hold any: only those written before it count).
    A default of a parameter every call passes never holds, so it is no knob (find_knobs' ``passed``); one
    that some call may leave out stays. Calls this cannot see (through a local alias, a partial, a
    registry) are not counted."""
    imported = _imported_names(perf_source, op)  # the harness's name -> the operator's
    tree = ast.parse(source)
    callables: dict[str, tuple[str, ast.arguments, int]] = {}  # the module's name -> (function, arguments, skip)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            callables[node.name] = (node.name, node.args, 0)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    positional = item.args.posonlyargs + item.args.args
                    skip = 1 if positional and positional[0].arg == "ctx" else 0
                    callables[f"{node.name}.apply"] = (f"{node.name}.forward", item.args, skip)
    for node in tree.body:  # module-level aliases: name = function / name = Class.apply
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = _dotted(node.value)
            if target in callables:
                callables[node.targets[0].id] = callables[target]
    passed: dict[str, set[str]] = {}
    module_names = {name: name for name in callables if "." not in name} | \
        {name.split(".")[0]: name.split(".")[0] for name in callables}
    calls = [(call, imported) for call in ast.walk(ast.parse(perf_source)) if isinstance(call, ast.Call)] + \
        [(call, module_names) for call in ast.walk(tree) if isinstance(call, ast.Call)]
    for call, names_in_scope in calls:
        name = _dotted(call.func)
        if name is None:
            continue
        head, _, rest = name.partition(".")
        if head not in names_in_scope:
            continue
        resolved = names_in_scope[head] + ("." + rest if rest else "")
        if resolved not in callables:
            continue
        function, args, skip = callables[resolved]
        positional = [a.arg for a in args.posonlyargs + args.args][skip:]
        # A *args or **kwargs may or may not hold an argument: only those written before it count.
        starred = next((i for i, a in enumerate(call.args) if isinstance(a, ast.Starred)), len(call.args))
        names = set(positional[:starred]) | {k.arg for k in call.keywords if k.arg}
        passed[function] = passed[function] & names if function in passed else names
    return passed


def _imported_names(perf_source: str, op: str) -> dict[str, str]:
    """The names the harness binds from ``TritonBench_v1.<op>``: its own name -> the operator's."""
    for node in ast.walk(ast.parse(perf_source)):
        if isinstance(node, ast.ImportFrom) and node.module == f"{PACKAGE}.{op}":
            return {a.asname or a.name: a.name for a in node.names}
    return {}


def _dotted(node: ast.expr) -> str | None:
    """``a`` or ``a.b`` for a name or one attribute of a name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def harness_identifiers(perf_source: str) -> set[str]:
    """Every name and attribute the harness uses: what it may call in the operator's module."""
    return source_ops.identifiers(ast.parse(perf_source))


def operator_parameters(source: str, perf_source: str, op: str) -> list[dict]:
    """The problem's parameters: the knobs of the operator's source (cut at its test block) that can take
    effect under its harness (program_worker.knobs_as_parameters): not a wrapper parameter's default the
    harness passes (``passed_arguments``), nor a knob in code the harness never runs
    (source_ops.reachable_functions from ``harness_identifiers``: an autograd Function's backward, a
    backward wrapper nothing calls)."""
    reached = source_ops.reachable_functions(source, harness_identifiers(perf_source))
    return knobs_as_parameters(source, passed_arguments(perf_source, op, source), reached)


def source_lengths(data_dir: str) -> dict[str, int]:
    """output_triton_len per operator, from TritonBench_G_v1.json (absent: empty)."""
    path = os.path.join(data_dir, "TritonBench_G_v1.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        records = json.load(f)
    out = {}
    for r in records:
        name = r.get("file") or r.get("filename") or r.get("name") or ""
        name = os.path.basename(str(name))
        if name.endswith(".py"):
            name = name[:-3]
        if name and "output_triton_len" in r:
            out[name] = int(r["output_triton_len"])
    return out


def harness_text(data_dir: str, op: str) -> str:
    return (f'"""Inputs and adapter of TritonBench-G\'s {op} (generated by kforge.tritonbench_g.importer)."""\n'
            "from kforge.tritonbench_g.harness import operator, search_shapes\n\n"
            f"DATA, OP = {os.path.abspath(data_dir)!r}, {op!r}\n\n\n"
            f"def shapes():\n    return search_shapes(DATA, OP, {SEARCH_SIZES!r})\n\n\n"
            "def all_shapes():\n    return operator(DATA, OP).shapes('all')\n\n\n"
            "def bind(module):\n    return operator(DATA, OP).bind(module)\n")


def experiment(data_dir: str, folder: str, op: str, call: str, parameters: list, strategy: str,
               seconds: float, seed: int, workers: int = DEFAULT_WORKERS, start: list | str = "default") -> dict:
    harness = os.path.join(folder, "harness.py")
    return {
        "problem": {"name": f"tritonbench-g.{op}", "program": os.path.join(os.path.abspath(data_dir), "kernels", op + ".py"),
                    "call": call, "inputs": harness + ":shapes", "adapter": harness + ":bind",
                    "end_marker": END_MARKER, "parameters": parameters, "time_shapes": [-1]},
        "strategy": strategy,
        # The original's configuration first, in both arms (and an autotuned original's other list
        # entries: program_worker.start_configurations): a search that finds nothing better still has
        # it, and kforge's evolution starts from it (2026-12-07: attention_score's 135 trials of a
        # mostly infeasible space gave no ok one; attention_llama's winner was slower than the original).
        "start": start,
        "evaluator": evaluator(seconds, workers),
        # The whole run within `seconds` of the GPU: workers' start and the original's reference runs
        # included, trials still running 1 s after the budget dropped.
        "budget": {"wall_time_s": seconds, "wall_includes_setup": True, "wall_grace_s": 1.0},
        "seed": seed,
        "output": os.path.join(folder, "run-" + ("kforge" if strategy == "hybrid" else strategy)),
    }


def import_operator(data_dir: str, out_dir: str, op: str, excluded: dict, lengths: dict, seconds: float,
                    seed: int, workers: int = DEFAULT_WORKERS) -> dict:
    record = {"op": op, "status": "ready", "reason": "", "call": None, "parameters": 0,
              "length": lengths.get(op)}
    if op in excluded:
        record.update(status="excluded", reason=excluded[op])
        return record
    with open(os.path.join(data_dir, "kernels", op + ".py"), encoding="utf-8") as f:
        source = cut_source(f.read())
    with open(os.path.join(data_dir, "perf", op + "_perf.py"), encoding="utf-8") as f:
        perf_source = f.read()
    calls = harness_call(perf_source, op)
    if not calls:
        record.update(status="error", reason=f"the harness does not import from {PACKAGE}.{op}")
        return record
    record["call"] = calls[0]
    try:
        parameters = operator_parameters(source, perf_source, op)
    except SyntaxError as e:
        record.update(status="error", reason=f"the operator does not parse: {e}")
        return record
    record["parameters"] = len(parameters)
    if not parameters:
        record.update(status="no_knob", reason="source_ops finds no knob")
        return record
    start = start_configurations(source, parameters)
    folder = os.path.join(os.path.abspath(out_dir), op)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "harness.py"), "w", encoding="utf-8") as f:
        f.write(harness_text(data_dir, op))
    for strategy, name in (("hybrid", "kforge.json"), ("random", "random.json")):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            json.dump(experiment(data_dir, folder, op, calls[0], parameters, strategy, seconds, seed, workers,
                                 start), f, indent=1)
            f.write("\n")
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="TritonBench-G's folder (kernels/, perf/, TritonBench_G_v1.json)")
    ap.add_argument("--out", required=True, help="the campaign folder to write")
    ap.add_argument("--ops", default="", help="comma-separated operators (default: all)")
    ap.add_argument("--seconds", type=float, default=30.0, help="wall-time budget per search (default 30)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                    help=f"worker processes on the GPU per search (default {DEFAULT_WORKERS})")
    ap.add_argument("--exclude", default="", help='JSON {"op": "reason"}: operators left out, with why')
    a = ap.parse_args(argv)
    if not 1 <= a.workers <= 64:
        print(f"kforge.tritonbench_g.importer: --workers {a.workers}: must be 1 to 64", file=sys.stderr)
        return 2
    for sub in ("kernels", "perf"):
        if not os.path.isdir(os.path.join(a.data, sub)):
            print(f"kforge.tritonbench_g.importer: {a.data}: no {sub}/ folder (expected TritonBench-G's data)",
                  file=sys.stderr)
            return 2
    excluded = {}
    if a.exclude:
        try:
            with open(a.exclude, encoding="utf-8") as f:
                excluded = json.load(f)
        except (OSError, ValueError) as e:
            print(f"kforge.tritonbench_g.importer: {a.exclude}: {e}", file=sys.stderr)
            return 2
    ops = operators(a.data)
    if a.ops:
        wanted = a.ops.split(",")
        unknown = sorted(set(wanted) - set(ops))
        if unknown:
            print(f"kforge.tritonbench_g.importer: --ops: no such operator: {', '.join(unknown)}", file=sys.stderr)
            return 2
        ops = [o for o in ops if o in wanted]
    lengths = source_lengths(a.data)
    os.makedirs(a.out, exist_ok=True)
    records = [import_operator(a.data, a.out, op, excluded, lengths, a.seconds, a.seed, a.workers)
               for op in ops]
    with open(os.path.join(a.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"{len(records)} operators: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
