"""Triton source operators: pure functions from the text of a Python module to new text.

They find and rewrite the tuning knobs of real Triton programs (a module with ``@triton.jit`` kernels and
the Python wrappers that launch them):

- ``find_knobs(source)``: every knob, found without hints (see ``find_knobs``);
- ``reachable_functions``, ``reached_knobs``: which functions a caller can run (from the ``identifiers``
  it uses), and the knobs in them;
- ``lift_literal``, ``set_launch_keyword``, ``set_constexpr_at_launch``: change one site;
- ``autotune_to_space``, ``remove_autotune``, ``apply_config``: take ``@triton.autotune`` apart;
- ``pin_heuristics``: fix the outputs of ``@triton.heuristics``.

Edits are textual, located by the positions of ``ast`` nodes, so comments and formatting outside the
edited span survive byte for byte. Each operator raises ``SourceOpError`` (naming the site and the
reason) when it does not apply: a source that does not parse, a site that does not exist or is
ambiguous, a value that conflicts with ``@triton.autotune`` or ``@triton.heuristics``. A caller turns that
into an invalid variant; nothing here executes the module.

Sites are strings ``"<function>:<line>"``: the qualified name of the enclosing function (``<module>`` at
the top level, ``Class.method`` inside a class) and the 1-based line where the launch call or the
assignment starts, as ``find_knobs`` reports them. ``"<function>"`` alone is accepted when that function
holds exactly one candidate. Operators that delete lines (``remove_autotune``, ``apply_config``) move
the lines below them: find the knobs again afterwards, or apply those operators last.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
import math
import types
from typing import Any, Iterable

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
# What triton.Config assumes for an option a configuration does not set (runtime/autotuner.py, 3.6).
CONFIG_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
# What a launch that omits num_warps/num_stages runs with, used only where Triton cannot be imported
# (launch_defaults reads the installed Triton): Triton 3.6.0's field defaults of CUDAOptions in
# triton/backends/nvidia/compiler.py (num_warps: int = 4, num_stages: int = 3).
LAUNCH_DEFAULTS_FALLBACK = {"num_warps": 4, "num_stages": 3}
NUM_WARPS_VALUES = [1, 2, 4, 8, 16]
# The value of a launch option's knob that leaves the source's own expression in place
# (``num_warps=ctx.num_warps``, ``num_warps=nw``): its default, so the default configuration launches as
# the original does where the value is computed at run time (set_launch_keyword leaves the text alone).
AS_WRITTEN = "as written"
NUM_STAGES_VALUES = [1, 2, 3, 4, 5]
# Powers of two suggested around a block size: current / 4 ... current * 4, within these bounds.
POWER_OF_TWO_SPAN = 2
BLOCK_MIN, BLOCK_MAX = 1, 1 << 16
BLOCK_REACH = 1024  # a power-of-two block size is always offered up to this


class SourceOpError(ValueError):
    """An operator does not apply to this source; the message names the site and the reason."""


# --- the parsed module -------------------------------------------------------------------------------

@dataclasses.dataclass
class Kernel:
    """A @triton.jit function and the decorators stacked on it."""
    name: str
    node: ast.FunctionDef
    params: list[str]
    constexprs: set[str]
    defaults: dict[str, Any]          # literal defaults of parameters
    autotune: ast.Call | None
    heuristics: ast.Call | None

    @property
    def site(self) -> str:
        first = min([self.node.lineno] + [d.lineno for d in self.node.decorator_list])
        return f"{self.name}:{first}"


@dataclasses.dataclass
class Launch:
    """A call ``kernel[grid](...)``."""
    kernel: Kernel
    call: ast.Call
    grid: ast.expr
    function: str                     # qualified name of the enclosing function, or <module>

    @property
    def line(self) -> int:
        return self.call.lineno

    @property
    def site(self) -> str:
        return f"{self.function}:{self.line}"

    def keyword(self, name: str) -> ast.keyword | None:
        return next((k for k in self.call.keywords if k.arg == name), None)

    def argument(self, name: str) -> ast.expr | None:
        """What the call passes for kernel parameter or launch option `name`: its keyword's value, else
        the positional argument bound to it; None where it passes nothing."""
        keyword = self.keyword(name)
        return keyword.value if keyword is not None else self.positional(name)

    def positional(self, name: str) -> ast.expr | None:
        """The positional argument bound to kernel parameter `name`, if the call passes it so."""
        if name not in self.kernel.params:
            return None
        index = self.kernel.params.index(name)
        args = self.call.args
        if any(isinstance(a, ast.Starred) for a in args[:index + 1]):
            return None
        return args[index] if index < len(args) else None


@dataclasses.dataclass
class Assignment:
    """``name = <int literal>`` (or one element of ``a, b = 1, 2``) in a function or at the top level, or
    a parameter's integer default (``def wrapper(x, BLOCK=1024)``: ``parameter``; it holds where a caller
    does not pass the argument)."""
    name: str
    value: ast.Constant
    function: str
    line: int
    parameter: bool = False

    @property
    def site(self) -> str:
        return f"{self.function}:{self.line}"


class Module:
    """A parsed source with byte-exact positions, its kernels, launches and scopes."""

    def __init__(self, source: str):
        self.text = source
        try:
            self.tree = ast.parse(source)
        except SyntaxError as e:
            raise SourceOpError(f"the source does not parse: line {e.lineno}:{e.offset}: {e.msg}") from None
        except ValueError as e:  # null bytes
            raise SourceOpError(f"the source does not parse: {e}") from None
        self.line_starts = _line_starts(source)
        self.kernels = {k.name: k for k in _find_kernels(self.tree)}
        self.scopes = _scopes(self.tree)           # qualified name -> function node (or the module)
        self.launches = [launch for scope, node in self.scopes.items()
                         for launch in _launches_in(node, scope, self.kernels)]

    # positions: ast columns are UTF-8 byte offsets
    def offset(self, line: int, col: int) -> int:
        start = self.line_starts[line - 1]
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        return start + len(self.text[start:end].encode()[:col].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset))

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def kernel(self, name: str) -> Kernel:
        if name not in self.kernels:
            known = ", ".join(sorted(self.kernels)) or "none"
            raise SourceOpError(f"no @triton.jit kernel named {name!r} (kernels: {known})")
        return self.kernels[name]

    def launch_at(self, site: str) -> Launch:
        return _select(site, self.launches, "launch of a @triton.jit kernel")

    def launches_of(self, kernel: Kernel) -> list[Launch]:
        return [launch for launch in self.launches if launch.kernel is kernel]


def _line_starts(text: str) -> list[int]:
    starts, position = [0], 0
    for line in text.splitlines(keepends=True):
        position += len(line)
        starts.append(position)
    return starts


def _select(site: str, candidates: list, what: str):
    """The candidate at `site` ("function:line", or "function" when it holds exactly one)."""
    function, _, line = site.partition(":")
    matching = [c for c in candidates if c.function == function and (not line or str(c.line) == line)]
    if len(matching) == 1:
        return matching[0]
    if not matching:
        known = ", ".join(sorted({c.site for c in candidates})) or "none"
        raise SourceOpError(f"site {site!r}: no {what} there (sites: {known})")
    raise SourceOpError(f"site {site!r} is ambiguous: {len(matching)} of {what} "
                        f"({', '.join(c.site for c in matching)}); give function:line")


def _decorator_name(node: ast.expr) -> str:
    """'triton.jit' for @triton.jit / @triton.jit(...), 'jit' for @jit, '' for anything else."""
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _is_decorator(node: ast.expr, name: str) -> bool:
    """@triton.<name>, @<name>, @triton.runtime.<name>, ... (the last part of the dotted name)."""
    dotted = _decorator_name(node)
    return dotted.split(".")[-1] == name and (dotted == name or dotted.startswith("triton"))


def _is_constexpr_annotation(node: ast.expr | None) -> bool:
    """``tl.constexpr``, ``triton.language.constexpr``, ``constexpr``, or the same as a string annotation
    (``BLOCK_SIZE: "tl.constexpr"``, as in many TritonBench-G files)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip().split(".")[-1] == "constexpr"
    return node is not None and _decorator_name(node).split(".")[-1] == "constexpr"


def _find_kernels(tree: ast.Module) -> Iterable[Kernel]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        decorators = node.decorator_list
        if not any(_is_decorator(d, "jit") for d in decorators):
            continue
        args = node.args.posonlyargs + node.args.args
        defaults = dict(zip([a.arg for a in args][len(args) - len(node.args.defaults):], node.args.defaults))
        yield Kernel(
            name=node.name, node=node, params=[a.arg for a in args],
            constexprs={a.arg for a in args if _is_constexpr_annotation(a.annotation)},
            defaults={n: d.value for n, d in defaults.items() if isinstance(d, ast.Constant)},
            autotune=next((d for d in decorators if isinstance(d, ast.Call) and _is_decorator(d, "autotune")), None),
            heuristics=next((d for d in decorators if isinstance(d, ast.Call) and _is_decorator(d, "heuristics")),
                            None))


def _scopes(tree: ast.Module) -> dict[str, ast.AST]:
    """Every function by qualified name ('outer.inner', 'Class.method'), and '<module>'."""
    scopes: dict[str, ast.AST] = {"<module>": tree}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                scopes[name] = child
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)
    visit(tree, "")
    return scopes


def _own_nodes(scope: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a scope, not descending into nested functions or classes (lambdas included)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _launches_in(scope: ast.AST, scope_name: str, kernels: dict[str, Kernel]) -> Iterable[Launch]:
    """The launches ``kernel[grid](...)`` of a scope, the kernel named directly or through a local alias
    (``fx = _gemma_forward if gemma else _forward`` ... ``fx[grid](...)``: TritonBench-G's
    fast_rms_layernorm) whose kernels take the same parameters (the alias's first, in name order)."""
    aliases = _kernel_aliases(scope, kernels)
    found = []
    for node in _own_nodes(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            target = node.func.value
            name = target.id if isinstance(target, ast.Name) else \
                target.attr if isinstance(target, ast.Attribute) else None
            if name in kernels:
                found.append(Launch(kernels[name], node, node.func.slice, scope_name))
            elif isinstance(target, ast.Name) and name in aliases:
                found.append(Launch(aliases[name], node, node.func.slice, scope_name))
    return sorted(found, key=lambda launch: (launch.call.lineno, launch.call.col_offset))


def _kernel_aliases(scope: ast.AST, kernels: dict[str, Kernel]) -> dict[str, Kernel]:
    """Local names every assignment of which is a kernel's name or a conditional choice among kernels'
    names, the kernels alike in parameters and constexprs (not themselves kernels): name -> the first."""
    values: dict[str, list[ast.expr]] = {}
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            values.setdefault(node.target.id, []).append(None)

    def choices(value: ast.expr | None) -> list[str] | None:
        if isinstance(value, ast.Name):
            return [value.id] if value.id in kernels else None
        if isinstance(value, ast.IfExp):
            body, orelse = choices(value.body), choices(value.orelse)
            return body + orelse if body is not None and orelse is not None else None
        return None

    aliases = {}
    for name, assigned in values.items():
        if name in kernels:
            continue
        options = [choices(v) for v in assigned]
        if not options or any(o is None for o in options):
            continue
        chosen = sorted({k for o in options for k in o})
        first = kernels[chosen[0]]
        if all(kernels[k].params == first.params and kernels[k].constexprs == first.constexprs for k in chosen):
            aliases[name] = first
    return aliases


# --- text edits --------------------------------------------------------------------------------------

class Edits:
    """Replacements of spans of the original text, applied together (spans must not overlap)."""

    def __init__(self, module: Module):
        self.module = module
        self.items: list[tuple[int, int, str]] = []

    def replace(self, node: ast.AST, text: str) -> None:
        start, end = self.module.span(node)
        self.items.append((start, end, text))

    def insert(self, position: int, text: str) -> None:
        self.items.append((position, position, text))

    def delete(self, start: int, end: int) -> None:
        self.items.append((start, end, ""))

    def apply(self) -> str:
        text = self.module.text
        previous_start = len(text) + 1
        # From the end backwards, so earlier offsets stay valid; of two insertions at one offset the
        # one made first ends up first.
        ordered = sorted(enumerate(self.items), key=lambda e: (e[1][0], e[1][1], e[0]), reverse=True)
        for _, (start, end, replacement) in ordered:
            if end > previous_start:
                raise SourceOpError(f"internal: overlapping edits at offset {start}")
            text = text[:start] + replacement + text[end:]
            previous_start = start
        return text


def _set_call_keyword(edits: Edits, module: Module, call: ast.Call, name: str, value_text: str) -> None:
    """Sets keyword `name` of `call` to `value_text`: replaces its value, or appends it after the last
    argument (keeping a trailing comma and the line layout)."""
    existing = next((k for k in call.keywords if k.arg == name), None)
    if existing is not None:
        edits.replace(existing.value, value_text)
        return
    arguments = list(call.args) + list(call.keywords)
    if arguments:
        last = max(arguments, key=lambda n: (n.end_lineno, n.end_col_offset))
        edits.insert(module.offset(last.end_lineno, last.end_col_offset), f", {name}={value_text}")
    else:
        edits.insert(module.offset(call.end_lineno, call.end_col_offset) - 1, f"{name}={value_text}")


def _delete_decorator(edits: Edits, module: Module, decorator: ast.expr) -> None:
    """Deletes '@decorator' with its whole lines when nothing else shares them."""
    start, end = module.span(decorator)
    at = module.text.rfind("@", 0, start)
    line_start = module.text.rfind("\n", 0, at) + 1
    line_end = module.text.find("\n", end)
    line_end = len(module.text) if line_end < 0 else line_end + 1
    rest = module.text[end:line_end]
    if module.text[line_start:at].strip() == "" and (rest.strip() == "" or rest.strip().startswith("#")):
        edits.delete(line_start, line_end)
    else:
        edits.delete(at, end)


def _literal_text(value: Any) -> str:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)
    raise SourceOpError(f"value {value!r} is not a Python literal (int, float, bool, str, None)")


# --- static evaluation of decorator arguments --------------------------------------------------------

class _StubConfig:
    """Stands in for triton.Config when a configuration list is evaluated without Triton."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None,
                 ir_override=None):
        self.kwargs = dict(kwargs)
        self.options = {"num_warps": num_warps, "num_stages": num_stages, "num_ctas": num_ctas,
                        "maxnreg": maxnreg}
        self.pre_hook = pre_hook


def _evaluate(module: Module, node: ast.expr, what: str) -> Any:
    """The value of a decorator argument: configuration lists written as literals, comprehensions or
    calls of module-level helper functions. Evaluated with a stub `triton` (Config, cdiv,
    next_power_of_2) and the module's undecorated functions and literal constants; never imports."""
    stub = types.SimpleNamespace(Config=_StubConfig, cdiv=lambda a, b: -(-a // b),
                                 next_power_of_2=lambda n: 1 << max(int(n) - 1, 0).bit_length())
    namespace: dict[str, Any] = {"triton": stub, "Config": _StubConfig, "itertools": itertools,
                                 "math": math, "__builtins__": __builtins__}
    for statement in module.tree.body:
        try:
            if isinstance(statement, ast.Assign):
                value = ast.literal_eval(statement.value)
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        namespace[target.id] = value
            elif isinstance(statement, ast.FunctionDef) and not statement.decorator_list:
                exec(compile(ast.Module([statement], []), "<source>", "exec"), namespace)
        except Exception:  # a helper that needs the module's imports: the configs may not use it
            continue
    try:
        return eval(compile(ast.Expression(node), "<source>", "eval"), namespace)
    except Exception as e:
        raise SourceOpError(f"{what} (line {node.lineno}) cannot be evaluated without running the "
                            f"module: {type(e).__name__}: {e}") from None


def _call_argument(call: ast.Call, position: int, name: str) -> ast.expr | None:
    keyword = next((k for k in call.keywords if k.arg == name), None)
    if keyword is not None:
        return keyword.value
    return call.args[position] if position < len(call.args) else None


@dataclasses.dataclass
class Autotune:
    """What a @triton.autotune decorator says, evaluated."""
    configs: list[dict[str, Any]]    # each: kwargs and the four launch options (defaults filled in)
    config_keys: list[str]           # kwargs keys, in first appearance order
    key: list[str]
    extras: dict[str, str]           # prune_configs_by, reset_to_zero, ...: their source text


def _autotune(module: Module, kernel: Kernel) -> Autotune:
    call = kernel.autotune
    if call is None:
        raise SourceOpError(f"kernel {kernel.name!r} ({kernel.site}) has no @triton.autotune")
    configs_node = _call_argument(call, 0, "configs")
    if configs_node is None:
        raise SourceOpError(f"@triton.autotune of {kernel.name} ({kernel.site}) has no configs")
    raw = _evaluate(module, configs_node, f"the autotune configs of {kernel.name}")
    if not isinstance(raw, (list, tuple)) or not all(isinstance(c, _StubConfig) for c in raw):
        raise SourceOpError(f"the autotune configs of {kernel.name} (line {configs_node.lineno}) are not "
                            "a list of triton.Config")
    if not raw:
        raise SourceOpError(f"the autotune configs of {kernel.name} (line {configs_node.lineno}) are empty")
    config_keys = list(dict.fromkeys(k for c in raw for k in c.kwargs))
    configs = []
    for index, config in enumerate(raw):
        values = {}
        for name in config_keys:
            if name in config.kwargs:
                values[name] = config.kwargs[name]
            elif name in kernel.defaults:
                values[name] = kernel.defaults[name]
            else:
                raise SourceOpError(f"autotune config {index} of {kernel.name} does not set {name!r} and the "
                                    "kernel gives it no default")
        values.update(config.options)
        configs.append(values)
    key_node = _call_argument(call, 1, "key")
    key = _evaluate(module, key_node, f"the autotune key of {kernel.name}") if key_node is not None else []
    named = {"configs", "key"}
    extras = {k.arg: module.segment(k.value) for k in call.keywords if k.arg not in named}
    return Autotune(configs, config_keys, list(key), extras)


def _heuristics_dict(module: Module, kernel: Kernel) -> ast.Dict:
    call = kernel.heuristics
    if call is None:
        raise SourceOpError(f"kernel {kernel.name!r} ({kernel.site}) has no @triton.heuristics")
    values = _call_argument(call, 0, "values")
    if not isinstance(values, ast.Dict) or any(k is None or not isinstance(k, ast.Constant) for k in values.keys):
        raise SourceOpError(f"@triton.heuristics of {kernel.name} (line {call.lineno}) is not a dict literal "
                            "with string keys")
    return values


def _heuristic_names(module: Module, kernel: Kernel, strict: bool = True) -> set[str]:
    """The names @triton.heuristics computes (none without it; if its table is not a literal: an error,
    or nothing when not `strict`)."""
    if kernel.heuristics is None:
        return set()
    try:
        return {k.value for k in _heuristics_dict(module, kernel).keys}
    except SourceOpError:
        if strict:
            raise
        return set()


# --- find_knobs --------------------------------------------------------------------------------------

def find_knobs(source: str, passed: dict[str, set[str]] | None = None) -> list[dict]:
    """Every tuning knob of the source, in source order. A knob is a dict:

    ``kind``: ``launch_constexpr`` (a literal keyword argument for a ``tl.constexpr`` parameter at a
    launch), ``literal`` (an integer literal assigned to a name that a launch or its grid uses, not the
    start of an accumulator; or, with ``parameter`` true, the integer default of a wrapper's parameter
    that a launch passes to a constexpr or as ``num_warps``/``num_stages``),
    ``launch_keyword`` (``num_warps``/``num_stages`` of a launch; ``present`` says whether it is
    written; one written as other than a literal has its ``expression``, ``current`` ``AS_WRITTEN`` and
    ``AS_WRITTEN`` first among its suggested values; one not written has ``implied``, the value Triton
    launches with then, from ``launch_defaults``), ``autotune`` (one key of
    a ``@triton.autotune`` configuration list, with ``values``), ``heuristic`` (one output of
    ``@triton.heuristics``, with its ``expression`` and ``argument_fact``: whether it is a flag computed
    from the call's arguments); an autotune or heuristics decorator that cannot be read statically gives
    one knob with ``name`` None and ``error``; ``site`` (``function:line``), ``kernel``, ``name``,
    ``current`` (the value the source writes, ``None`` when absent or computed), ``suggested`` (values
    worth trying: powers of two around a block size, num_warps in {1,2,4,8,16}, num_stages in 1..5 (and
    the value written where it is outside those), both booleans for a flag).

    Launches of autotuned kernels have no ``launch_constexpr``/``launch_keyword`` knobs: the autotune
    configurations own those values; nor has a ``num_warps``/``num_stages`` that the kernel's
    ``@triton.heuristics`` computes (it overrides the launch's keyword: TritonBench-G's uniform_sampling
    and softmax_flaggems).
    """
    module = Module(source)
    knobs = []
    literals = [_literal_candidates(module, launch, (passed or {}).get(launch.function, set()))
                for launch in module.launches]
    for launch, reaching in zip(module.launches, literals):
        knobs += _launch_knobs(module, launch, reaching)
    knobs += _literal_knobs(module, literals)
    for kernel in module.kernels.values():
        for present, knobs_of in ((kernel.autotune, _autotune_knobs), (kernel.heuristics, _heuristic_knobs)):
            if present is None:
                continue
            try:
                knobs += knobs_of(module, kernel)
            except SourceOpError as e:  # reported as a knob that cannot be tuned, not as a failure
                kind = "autotune" if present is kernel.autotune else "heuristic"
                knobs.append({**_knob(kind, kernel.site, kernel.name, None, None), "suggested": [],
                              "error": str(e)})
    order = {"autotune": 0, "heuristic": 1, "literal": 2, "launch_constexpr": 3, "launch_keyword": 4}
    return sorted(knobs, key=lambda k: (int(k["site"].rsplit(":", 1)[1]), order[k["kind"]]))


def _launch_knobs(module: Module, launch: Launch, literals: list[Assignment]) -> list[dict]:
    """The launch's constexpr and option knobs. A ``num_warps``/``num_stages`` written as a name that an
    integer literal reaching the launch assigns (``num_warps = 4`` ... ``num_warps=num_warps``) is that
    literal's knob, not one of its own: a second knob would override the literal with a value the source
    does not state, so the default configuration would not be the original's launch (TritonBench-G's
    parallel_attention started its searches at one warp, 21x slower than its original, 2026-12-08)."""
    kernel = launch.kernel
    if kernel.autotune is not None:
        return []
    heuristic = _heuristic_names(module, kernel, strict=False)
    knobs = []
    for name in kernel.params:
        if name not in kernel.constexprs or name in heuristic:
            continue
        value = launch.argument(name)
        if isinstance(value, ast.Constant):
            knobs.append(_knob("launch_constexpr", launch.site, kernel.name, name, value.value))
    for option in ("num_warps", "num_stages"):
        if option in heuristic:  # @triton.heuristics sets it over the launch's keyword: no knob there
            continue
        keyword = launch.keyword(option)
        if keyword is not None and isinstance(keyword.value, ast.Name) \
                and keyword.value.id in {a.name for a in literals}:
            continue
        current = keyword.value.value if keyword is not None and isinstance(keyword.value, ast.Constant) \
            else None
        knob = _knob("launch_keyword", launch.site, kernel.name, option, current, role=option)
        knob["present"] = keyword is not None
        if keyword is None:
            knob["implied"] = launch_defaults()[option]
        elif not isinstance(keyword.value, ast.Constant):
            # Computed at run time: the source's own expression is a value of the knob, and its default.
            knob["expression"] = module.segment(keyword.value)
            knob["current"] = AS_WRITTEN
            knob["suggested"] = [AS_WRITTEN] + knob["suggested"]
        knobs.append(knob)
    return knobs


@functools.cache
def launch_defaults() -> dict[str, int]:
    """``num_warps`` and ``num_stages`` of a launch that does not write them: the field defaults of the
    installed Triton's CUDA backend options (``triton.backends.nvidia.compiler.CUDAOptions``, which a
    launch's keywords override), else ``LAUNCH_DEFAULTS_FALLBACK`` where Triton cannot be imported."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
        fields = {f.name: f.default for f in dataclasses.fields(CUDAOptions)}
        return {option: int(fields[option]) for option in LAUNCH_DEFAULTS_FALLBACK}
    except Exception:  # no Triton, no NVIDIA backend, or options of another shape
        return dict(LAUNCH_DEFAULTS_FALLBACK)


def _literal_knobs(module: Module, literals: list[list[Assignment]]) -> list[dict]:
    """Integer literals assigned to names that a launch uses, directly or through other local names
    (a grid tuple or lambda assigned first); module-level constants count when no local assignment
    shadows them. ``literals``: ``_literal_candidates`` of each of ``module.launches``, in order."""
    knobs, seen = [], set()
    for launch, reaching in zip(module.launches, literals):
        for assignment in reaching:
            if (assignment.site, assignment.name) not in seen:
                seen.add((assignment.site, assignment.name))
                role = _role_of(assignment.name, module.launches)
                knob = _knob("literal", assignment.site, launch.kernel.name, assignment.name,
                             assignment.value.value, role=role)
                if assignment.parameter:
                    knob["parameter"] = True
                knobs.append(knob)
    return knobs


def _literal_candidates(module: Module, launch: Launch, passed: set[str] = frozenset()) -> list[Assignment]:
    """The integer-literal assignments whose names reach ``launch``: its function's own, then the module's
    that the function does not shadow. A parameter's default counts only where the launch passes the
    parameter to a constexpr or as a launch option, the function uses it nowhere but in its launches and
    their grids (one that also shapes a buffer, such as int8_quantization's ``BLKQ`` sizing the scales, is
    the operator's contract), and not every caller passes it (``passed``). Not the start of an
    accumulator (a name its scope updates in place, ``N = 1`` ... ``N *= shape[i]``): that literal is the
    identity of the update, and any other value is wrong (TritonBench-G's mean_reduction: 64 of random
    search's 75 trials, 2026-12-08)."""
    scope = module.scopes[launch.function]
    compile_time = _compile_time_names(launch)
    launches = [other for other in module.launches if other.function == launch.function]
    local = [a for a in _assignments(scope, launch.function)
             if not a.parameter or (a.name in compile_time and a.name not in passed
                                    and _launch_only(scope, a.name, launches))]
    used = _names_reaching(launch.call, scope) - _accumulated(scope)
    globals_ = [g for g in _assignments(module.tree, "<module>") if not _rebound_later(module.tree, g)] \
        if launch.function != "<module>" else []
    global_names = used - _accumulated(module.tree) - _local_names(scope)
    return [a for a in local if a.name in used] + [g for g in globals_ if g.name in global_names]


def _rebound_later(tree: ast.Module, assignment: Assignment) -> bool:
    """Whether a later top-level statement binds the name of a top-level ``assignment`` again, unconditionally
    (an assignment, a def, a class, an import; not one inside ``if``/``for``/``try``: fast_ce_loss writes
    ``MAX_FUSED_SIZE = 65536`` twice): a function called after the import reads the last."""
    statements = tree.body
    at = next((i for i, s in enumerate(statements)
               if any(n is assignment.value for n in ast.walk(s))), None)
    if at is None:
        return False
    for later in statements[at + 1:]:
        bound: set[str] = set()
        if isinstance(later, (ast.Assign, ast.AnnAssign)) and later.value is not None:
            bound = _replaced_names(later)  # not BLOCK = BLOCK * 2
        elif isinstance(later, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = {later.name}
        elif isinstance(later, (ast.Import, ast.ImportFrom)):
            bound = {(a.asname or a.name).split(".")[0] for a in later.names}
        if assignment.name in bound:
            return True
    return False


def _replaced_names(assign: ast.Assign | ast.AnnAssign) -> set[str]:
    """The names an assignment binds to something that does not read them (``BLOCK = 128``, not
    ``BLOCK = min(BLOCK, n)``): their earlier value is gone."""
    read = {n.id for n in ast.walk(assign.value) if isinstance(n, ast.Name)}
    targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} - read


def _local_names(scope: ast.AST) -> set[str]:
    """The names a function binds (its parameters, and every name it assigns, unless declared global):
    a module constant of the same name is not what it reads. None for the module itself."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return set()
    args = scope.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    declared = set()
    own = {id(n) for node in _own_nodes(scope) if isinstance(node, ast.comprehension) for n in ast.walk(node.target)}
    for node in _own_nodes(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and id(node) not in own:
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    return names - declared


def _compile_time_names(launch: Launch) -> set[str]:
    """Names the launch passes as they are to a ``tl.constexpr`` parameter or as ``num_warps``/``num_stages``
    (``BLOCK=BLOCK``, ``num_warps=nw``): where a wrapper parameter's default is a knob (a parameter that
    reaches the kernel only as a runtime argument or through the grid, such as a softmax scale or a
    count, is data)."""
    values = (launch.argument(name) for name in list(launch.kernel.constexprs) + ["num_warps", "num_stages"])
    return {value.id for value in values if isinstance(value, ast.Name)}


def _launch_only(scope: ast.AST, name: str, launches: list[Launch]) -> bool:
    """Whether the scope reads ``name`` only in ``launches``' grids, constexpr arguments and launch options,
    and in assignments to names that are themselves read only so (``grid = (triton.cdiv(n, BLOCK),)``), or in
    an ``assert``: not in a runtime argument, a buffer passed to a kernel, a return value or a branch."""
    inside = {id(n) for launch in launches for part in _compile_time_parts(launch) for n in ast.walk(part)}
    inside |= {id(n) for node in _own_nodes(scope) if isinstance(node, ast.Assert) for n in ast.walk(node)}
    owner: dict[int, ast.Assign] = {}
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            for n in ast.walk(node.value):
                owner[id(n)] = node
    checking: set[str] = set()

    def only(n: str) -> bool:
        if n in checking:  # a cycle of assignments: decided by its other reads
            return True
        checking.add(n)
        for node in _own_nodes(scope):
            if not (isinstance(node, ast.Name) and node.id == n and isinstance(node.ctx, ast.Load)):
                continue
            if id(node) in inside:
                continue
            assign = owner.get(id(node))
            targets = [t for target in assign.targets for t in ast.walk(target) if isinstance(t, ast.expr)] \
                if assign else []
            if not targets or not all(isinstance(t, (ast.Name, ast.Tuple)) for t in targets) or \
                    not all(only(t.id) for t in targets if isinstance(t, ast.Name)):
                return False
        return True
    return only(name)


def _compile_time_parts(launch: Launch) -> list[ast.expr]:
    """A launch's grid, and the values it passes to constexpr parameters or as launch options."""
    values = (launch.argument(name) for name in list(launch.kernel.constexprs) + list(LAUNCH_OPTIONS))
    return [launch.grid] + [value for value in values if value is not None]


def _accumulated(scope: ast.AST) -> set[str]:
    """Names that an augmented assignment (``+=``, ``*=``, ...) of the scope updates."""
    return {node.target.id for node in _own_nodes(scope)
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)}


def _assignments(scope: ast.AST, scope_name: str) -> list[Assignment]:
    found = _parameter_defaults(scope, scope_name)
    for node in _own_nodes(scope):
        pairs = []
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    pairs.append((target, node.value))
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                        and len(target.elts) == len(node.value.elts):
                    pairs += zip(target.elts, node.value.elts)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs.append((node.target, node.value))
        for target, value in pairs:
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant) \
                    and type(value.value) is int:
                found.append(Assignment(target.id, value, scope_name, value.lineno))
    return sorted(found, key=lambda a: a.line)


def _parameter_defaults(scope: ast.AST, scope_name: str) -> list[Assignment]:
    """The integer defaults of a function's parameters (positional and keyword-only; not bool) that the
    function does not assign again from something else (``BLOCK = 128`` replaces the default;
    ``BLOCK = min(BLOCK, n)`` still starts from it)."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    assigned = set()
    for node in _own_nodes(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            assigned |= _replaced_names(node)
        elif isinstance(node, (ast.For, ast.With, ast.NamedExpr)):
            targets = [node.target] if not isinstance(node, ast.With) else \
                [i.optional_vars for i in node.items if i.optional_vars is not None]
            assigned |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    args = scope.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) + \
        [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return [Assignment(a.arg, d, scope_name, d.lineno, parameter=True) for a, d in pairs
            if isinstance(d, ast.Constant) and type(d.value) is int and a.arg not in assigned]


def _names_reaching(call: ast.Call, scope: ast.AST) -> set[str]:
    """Names the launch reads, closed over the local assignments of the names it reads."""
    values_of: dict[str, list[ast.AST]] = {}
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        values_of.setdefault(name.id, []).append(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            values_of.setdefault(node.name, []).append(node)   # def grid(meta): ...
    used, work = set(), [call]
    while work:
        for node in ast.walk(work.pop()):
            if isinstance(node, ast.Name) and node.id not in used:
                used.add(node.id)
                work += values_of.get(node.id, [])
    return used


def _role_of(name: str, launches: list[Launch]) -> str:
    """num_warps / num_stages when a launch passes the name as that option, else a block size."""
    for launch in launches:
        for option in ("num_warps", "num_stages"):
            keyword = launch.keyword(option)
            if keyword is not None and isinstance(keyword.value, ast.Name) and keyword.value.id == name:
                return option
    lowered = name.lower()
    return "num_warps" if "warps" in lowered else "num_stages" if "stages" in lowered else "block"


def _autotune_knobs(module: Module, kernel: Kernel) -> list[dict]:
    autotune = _autotune(module, kernel)
    knobs = []
    for name in autotune.config_keys + [o for o in LAUNCH_OPTIONS if o in ("num_warps", "num_stages")
                                        or any(c[o] != CONFIG_DEFAULTS[o] for c in autotune.configs)]:
        values = _sorted_unique(c[name] for c in autotune.configs)
        knob = _knob("autotune", kernel.site, kernel.name, name, autotune.configs[0][name],
                     role=name if name in LAUNCH_OPTIONS else "block")
        knob["values"] = values
        knob["suggested"] = _sorted_unique(values + knob["suggested"])
        knobs.append(knob)
    return knobs


def _heuristic_knobs(module: Module, kernel: Kernel) -> list[dict]:
    knobs = []
    values = _heuristics_dict(module, kernel)
    for key, value in zip(values.keys, values.values):
        body = value.body if isinstance(value, ast.Lambda) else value
        boolean = isinstance(body, (ast.Compare, ast.BoolOp)) or \
            (isinstance(body, ast.UnaryOp) and isinstance(body.op, ast.Not))
        knob = _knob("heuristic", kernel.site, kernel.name, key.value, None)
        knob["expression"] = module.segment(value)
        knob["suggested"] = [False, True] if boolean else []
        # A flag computed from the call's arguments (``lambda args: args["N"] % args["BLOCK"] == 0``)
        # states a fact about them: pinned, it is what the heuristic gives, slower, or wrong.
        knob["argument_fact"] = boolean and isinstance(value, ast.Lambda) and bool(
            {a.arg for a in value.args.args} & {n.id for n in ast.walk(body) if isinstance(n, ast.Name)})
        knobs.append(knob)
    return knobs


def _knob(kind: str, site: str, kernel: str, name: str, current: Any, role: str = "block") -> dict:
    return {"kind": kind, "site": site, "kernel": kernel, "name": name, "current": current,
            "suggested": suggested_values(role, current)}


def suggested_values(role: str, current: Any) -> list:
    """Values worth trying for a knob of this role (num_warps, num_stages, block) and current value."""
    if role in ("num_warps", "num_stages"):
        values = NUM_WARPS_VALUES if role == "num_warps" else NUM_STAGES_VALUES
        written = [current] if type(current) is int and current > 0 and current not in values else []
        return sorted(values + written)
    if isinstance(current, bool):
        return [False, True]
    if isinstance(current, int) and current > 0 and current & (current - 1) == 0:
        # Powers of two from a quarter of the current value up to 4x it, and at least up to BLOCK_REACH:
        # code written with a tiny block (TritonBench-G's add_example: BLOCK_SIZE = 4) is tuned upwards.
        exponent = current.bit_length() - 1
        top = max(exponent + POWER_OF_TWO_SPAN, BLOCK_REACH.bit_length() - 1)
        return [1 << e for e in range(exponent - POWER_OF_TWO_SPAN, top + 1)
                if e >= 0 and BLOCK_MIN <= 1 << e <= BLOCK_MAX]
    return [] if current is None else [current]


def _sorted_unique(values: Iterable[Any]) -> list:
    unique = list(dict.fromkeys(values))
    try:
        return sorted(unique, key=lambda v: (v is not None, v))
    except TypeError:
        return unique


# --- reachability ------------------------------------------------------------------------------------

def reachable_functions(source: str, references: Iterable[str]) -> set[str]:
    """The functions of the source (qualified names, as find_knobs' sites name them) that may run when a
    caller that uses the identifiers ``references`` (a harness's names and attributes) calls into the
    module: a function is reached when a reached function, the module's top-level code or the caller
    names it (by its last name: ``wrapper``, ``self.helper``); a class named so reaches its methods, but
    an autograd Function's ``backward`` only where something reached names ``backward`` (``loss.backward()``),
    since ``Fn.apply`` runs ``forward`` alone. Over-approximate otherwise: any name that could be the
    function counts. A knob in a function outside the set never takes effect."""
    module = Module(source)
    functions = {name: node for name, node in module.scopes.items() if name != "<module>"}
    classes = _classes(module.tree)
    by_last: dict[str, list[str]] = {}
    for name in functions:
        by_last.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    reached: set[str] = set()
    seen_ids: set[str] = set()
    work = list(references) + sorted(_import_time_identifiers(module.tree))
    while work:
        identifier = work.pop()
        if identifier in seen_ids:
            continue
        seen_ids.add(identifier)
        targets = list(by_last.get(identifier, []))  # a method named backward: only by that name
        for cls in classes.get(identifier, []):
            targets += [f for f in functions if f.startswith(cls + ".") and f.count(".") == cls.count(".") + 1
                        and not f.endswith(".backward")]
        for function in targets:
            if function not in reached:
                reached.add(function)
                work += sorted(identifiers(functions[function]))
    return reached


def reached_knobs(source: str, knobs: list[dict], reached: set[str]) -> list[dict]:
    """find_knobs' ``knobs`` of ``source`` that can take effect when only the functions ``reached``
    (reachable_functions') and the module's top-level code run: a launch's or a literal's knob where its
    site's function is reached; an autotune or heuristic knob where its kernel is reached (named by reached
    code: a launch, or a helper that launches what it is handed) or no launch of it is found (it may be
    launched in a way this module does not show)."""
    module = Module(source)
    live = set(reached) | {"<module>"}
    launched: dict[str, bool] = {}
    for launch in module.launches:
        launched[launch.kernel.name] = launched.get(launch.kernel.name, False) or launch.function in live
    return [k for k in knobs
            if (k["kernel"] in live or launched.get(k["kernel"], True) if k["kind"] in ("autotune", "heuristic")
                else k["site"].rpartition(":")[0] in live)]


def _classes(tree: ast.Module) -> dict[str, list[str]]:
    """Class name -> the qualified prefixes of the classes so named (``Outer.Inner``, ``f.Local``)."""
    found: dict[str, list[str]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                found.setdefault(child.name, []).append(prefix + child.name)
                visit(child, prefix + child.name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)
    visit(tree, "")
    return found


def identifiers(node: ast.AST) -> set[str]:
    """The names a piece of code (a function with its defaults and decorators, a parsed module) reads and
    the attributes it takes."""
    return _names_and_attributes(ast.walk(node))


def _import_time_identifiers(tree: ast.Module) -> set[str]:
    """The names and attributes the code that runs at import uses: the module's top-level statements and
    every class body's (``forward = staticmethod(_forward)``), the decorators, defaults and base classes
    of its functions and classes; not function bodies."""
    nodes: list[ast.AST] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nodes += node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]
        elif isinstance(node, ast.ClassDef):
            nodes += node.decorator_list + node.bases + [k.value for k in node.keywords]
            stack += node.body
        else:
            nodes.append(node)
    return _names_and_attributes(n for node in nodes for n in _walk_outside_functions(node))


def _walk_outside_functions(node: ast.AST) -> Iterable[ast.AST]:
    """``node`` and its descendants, not descending into nested functions or classes (lambdas included)."""
    yield node
    yield from _own_nodes(node)


def _names_and_attributes(nodes: Iterable[ast.AST]) -> set[str]:
    found = set()
    for n in nodes:
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
    return found


# --- site operators ----------------------------------------------------------------------------------

def lift_literal(source: str, site: str, name: str, placeholder: str) -> str:
    """Replaces the integer literal assigned to `name` at `site` by the text `placeholder`
    (a template marker like ``{BLOCK_SIZE}``, or another value written as Python)."""
    module = Module(source)
    function = site.partition(":")[0]
    if function not in module.scopes:
        raise SourceOpError(f"site {site!r}: no function {function!r}")
    candidates = [a for a in _assignments(module.scopes[function], function) if a.name == name]
    assignment = _select(site, candidates, f"integer literal assigned to {name!r}")
    edits = Edits(module)
    edits.replace(assignment.value, placeholder)
    return edits.apply()


def set_launch_keyword(source: str, site: str, keyword: str, value: Any) -> str:
    """Sets launch option `keyword` (num_warps, num_stages, num_ctas, maxnreg) at the launch at `site`:
    overrides the written value or adds the keyword; ``AS_WRITTEN`` leaves the launch as it is."""
    if keyword not in LAUNCH_OPTIONS:
        raise SourceOpError(f"{keyword!r} is not a launch option ({', '.join(LAUNCH_OPTIONS)})")
    module = Module(source)
    launch = module.launch_at(site)
    if launch.kernel.autotune is not None:
        raise SourceOpError(f"site {launch.site}: {launch.kernel.name} is autotuned; its configurations set "
                            f"{keyword} (use apply_config)")
    if isinstance(value, str) and value == AS_WRITTEN:
        return source
    edits = Edits(module)
    _set_call_keyword(edits, module, launch.call, keyword, _literal_text(value))
    return edits.apply()


def set_constexpr_at_launch(source: str, site: str, name: str, value: Any) -> str:
    """Sets the ``tl.constexpr`` argument `name` of the launch at `site` to `value`: replaces the
    keyword or positional argument that passes it, or adds a keyword."""
    module = Module(source)
    launch = module.launch_at(site)
    kernel = launch.kernel
    _check_settable_constexpr(module, kernel, name, launch.site)
    edits = Edits(module)
    _set_constexpr(edits, module, launch, name, _literal_text(value))
    return edits.apply()


def _check_settable_constexpr(module: Module, kernel: Kernel, name: str, site: str) -> None:
    if name not in kernel.constexprs:
        raise SourceOpError(f"site {site}: {name!r} is not a tl.constexpr parameter of {kernel.name} "
                            f"(constexprs: {', '.join(sorted(kernel.constexprs)) or 'none'})")
    if name in _heuristic_names(module, kernel):
        raise SourceOpError(f"site {site}: {kernel.name}'s @triton.heuristics computes {name!r} "
                            "(use pin_heuristics)")
    if kernel.autotune is not None and name in _autotune(module, kernel).config_keys:
        raise SourceOpError(f"site {site}: {kernel.name}'s autotune configurations set {name!r} "
                            "(use apply_config)")


def _set_constexpr(edits: Edits, module: Module, launch: Launch, name: str, value_text: str) -> None:
    positional = launch.positional(name)
    if positional is not None and launch.keyword(name) is None:
        edits.replace(positional, value_text)
    else:
        _set_call_keyword(edits, module, launch.call, name, value_text)


# --- autotune and heuristics -------------------------------------------------------------------------

def autotune_to_space(source: str, kernel_name: str, widen: bool = False) -> dict:
    """The search space of a kernel's @triton.autotune list:

    ``{"kernel", "parameters": [{"name", "values", "default"}], "constraints": [...], "key": [...],
    "extras": {...}}`` where each parameter's values are the union of that key's values over the
    configurations (num_warps and num_stages always, num_ctas/maxnreg when a configuration sets them),
    the default is the first configuration's, and (unless `widen`) one constraint
    ``(A, B, ...) in [(a1, b1, ...), ...]`` keeps exactly the listed combinations. ``extras`` holds
    the decorator's other arguments as source text (``prune_configs_by``, ``reset_to_zero``, ...): the
    caller must honour them (a pruned list is a subset of the space; reset_to_zero outputs must be
    zeroed before each timed run)."""
    module = Module(source)
    kernel = module.kernel(kernel_name)
    autotune = _autotune(module, kernel)
    names = autotune.config_keys + [o for o in LAUNCH_OPTIONS if o in ("num_warps", "num_stages")
                                    or any(c[o] != CONFIG_DEFAULTS[o] for c in autotune.configs)]
    parameters = [{"name": n, "values": _sorted_unique(c[n] for c in autotune.configs),
                   "default": autotune.configs[0][n]} for n in names]
    combinations = list(dict.fromkeys(tuple(c[n] for n in names) for c in autotune.configs))
    constraints = []
    if not widen and len(combinations) < math.prod(len(p["values"]) for p in parameters):
        listed = ", ".join("(" + ", ".join(_literal_text(v) for v in combo) + ("," if len(combo) == 1 else "")
                           + ")" for combo in combinations)
        constraints.append(f"({', '.join(names)}{',' if len(names) == 1 else ''}) in [{listed}]")
    return {"kernel": kernel_name, "parameters": parameters, "constraints": constraints,
            "key": autotune.key, "extras": autotune.extras}


def autotune_configs(source: str, kernel_name: str) -> list[dict[str, Any]]:
    """The kernel's @triton.autotune configurations in list order, each its kwargs and the four launch
    options (those a configuration does not set at triton.Config's defaults)."""
    module = Module(source)
    return [dict(c) for c in _autotune(module, module.kernel(kernel_name)).configs]


def remove_autotune(source: str, kernel_name: str) -> str:
    """The source without the kernel's @triton.autotune decorator. Its launches then need the tuned
    values passed explicitly (apply_config does both)."""
    module = Module(source)
    kernel = module.kernel(kernel_name)
    if kernel.autotune is None:
        raise SourceOpError(f"kernel {kernel_name!r} ({kernel.site}) has no @triton.autotune")
    edits = Edits(module)
    _delete_decorator(edits, module, kernel.autotune)
    return edits.apply()


def apply_config(source: str, kernel_name: str, config: dict[str, Any]) -> str:
    """Removes the kernel's @triton.autotune and passes `config` at every launch of the kernel:
    its constexpr values as keyword arguments, num_warps/num_stages/num_ctas/maxnreg as launch options
    (maxnreg None: not passed). `config` must set every key the autotune configurations set."""
    module = Module(source)
    kernel = module.kernel(kernel_name)
    autotune = _autotune(module, kernel)
    missing = [k for k in autotune.config_keys if k not in config]
    if missing:
        raise SourceOpError(f"config for {kernel_name} lacks {', '.join(missing)} (its autotune "
                            "configurations set them)")
    heuristic = _heuristic_names(module, kernel)
    for name in config:
        if name in LAUNCH_OPTIONS:
            continue
        if name not in kernel.constexprs:
            raise SourceOpError(f"config for {kernel_name}: {name!r} is neither a tl.constexpr parameter nor "
                                f"a launch option ({', '.join(LAUNCH_OPTIONS)})")
        if name in heuristic:
            raise SourceOpError(f"config for {kernel_name}: {name!r} is computed by @triton.heuristics")
    launches = module.launches_of(kernel)
    if not launches:
        raise SourceOpError(f"no launch of {kernel_name} in the source: nothing would pass the config")
    edits = Edits(module)
    _delete_decorator(edits, module, kernel.autotune)
    for launch in launches:
        for name, value in config.items():
            if name in LAUNCH_OPTIONS:
                if value is not None:
                    _set_call_keyword(edits, module, launch.call, name, _literal_text(value))
            else:
                _set_constexpr(edits, module, launch, name, _literal_text(value))
    return edits.apply()


def pin_heuristics(source: str, kernel_name: str, values: dict[str, Any]) -> str:
    """Replaces the named outputs of the kernel's @triton.heuristics by constants
    (``"BLOCK": lambda args: 128``); the other outputs stay computed."""
    module = Module(source)
    kernel = module.kernel(kernel_name)
    table = _heuristics_dict(module, kernel)
    entries = {k.value: v for k, v in zip(table.keys, table.values)}
    unknown = [n for n in values if n not in entries]
    if unknown:
        raise SourceOpError(f"@triton.heuristics of {kernel_name} (line {kernel.heuristics.lineno}) computes "
                            f"{', '.join(sorted(entries))}, not {', '.join(unknown)}")
    edits = Edits(module)
    for name, value in values.items():
        edits.replace(entries[name], f"lambda args: {_literal_text(value)}")
    return edits.apply()
