"""kforge's Triton compile server: Triton source in, an sm_XX cubin and its launch metadata out.

A long-lived process driven by kforge's C++ side (a pool of them, one request at a time each). It imports
Triton once and compiles with ``triton.compile(ASTSource(...), target=GPUTarget("cuda", arch, 32))``; no
GPU and no torch are needed.

Run it as ``PYTHONPATH=<repo>/python python -m kforge.triton.compile_server`` or by path
(``python <repo>/python/kforge/triton/compile_server.py``).

Protocol (version 1)
====================
One JSON object per line on stdin; one JSON object per line on stdout, flushed after each, in request
order. Nothing else is ever written to stdout (Triton's and ptxas' prints are diverted: logs go to
stderr). End of input ends the server with status 0.

``{"op": "hello"}``
    -> ``{"ok": true, "triton": "3.6.0", "python": "3.11.7", "pid": 1234}``

``{"op": "exit"}``
    -> no answer; the server exits with status 0.

``{"op": "compile", "id": N, "source": "<text of the .py module>", "file_name": "softmax.py",
"entry": "softmax_kernel", "signature": {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
"constexprs": {"BLOCK": 1024}, "divisible_by_16": ["x_ptr", "n"],
"options": {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": null}, "arch": 90,
"cache_dir": "/abs/dir"}``

    ``signature`` names every parameter of ``entry`` with a Triton type: a pointer ``*fp32`` (``*k...``
    for a constant pointer), a scalar (``i1 i8 i16 i32 i64 u8 u16 u32 u64 fp16 bf16 fp32 fp64``,
    fp8 types) or ``constexpr``. ``constexprs`` gives the constexpr values (a missing one takes the
    Python default of the parameter, if it has one). ``divisible_by_16`` lists the non-constexpr
    parameters known to be multiples of 16 (pointers: 16-byte aligned addresses; integers: values);
    Triton vectorises memory accesses only with it. ``options`` may name any Triton CUDA option
    (num_warps, num_stages, num_ctas, maxnreg, enable_fp_fusion, launch_pdl, ...); ``null`` means
    not set. ``file_name`` (optional, default ``kernel.py``) is the name error messages show.
    ``id`` is echoed.

    Success::

        {"id": N, "ok": true, "cubin_path": "/abs/dir/<key>.cubin", "key": "<sha256 hex>",
         "name": "<entry symbol in the cubin>", "cache_hit": false, "seconds": 0.46,
         "metadata": {"shared": 0, "num_warps": 4, "num_ctas": 1, "cluster_dims": [1, 1, 1],
                      "global_scratch_size": 0, "global_scratch_align": 1,
                      "profile_scratch_size": 0, "profile_scratch_align": 1, "maxnreg": null,
                      "launch_cooperative_grid": false, "launch_pdl": false, "tensordesc_meta": null,
                      "registers": 26, "spills": 0},
         "params": ["x_ptr", "n"], "log": "<ptxas -v output>"}

    Failure of the source (a compile error, a module that does not import, an entry that is not a
    ``@triton.jit`` function, a signature that does not match the function): data, not a crash::

        {"id": N, "ok": false, "log": "softmax.py:12:8: <error>\\n<the source line>\\n<caret>\\n\\n<Triton's message>"}

    A malformed request (missing or ill-typed field, unknown option name, unsupported type)::

        {"id": N, "ok": false, "error": "bad request: <what and where>"}

Launching the cubin (what the runner must know)
-----------------------------------------------
- The entry ``name`` takes ``params`` in order (pointers as 64-bit device addresses, scalars by value),
  then TWO more pointers that Triton appends: the global scratch and the profile scratch. Pass 0 for
  each whose ``*_scratch_size`` is 0; else allocate ``grid_x * grid_y * grid_z * num_ctas * size`` bytes
  aligned to ``*_scratch_align`` (Triton's own launcher does so; device-side tensor descriptors need the
  global scratch).
- Block: ``(32 * num_warps, 1, 1)``. Dynamic shared memory: ``metadata.shared`` bytes (above 48 KiB set
  ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` first; above the device's opt-in limit the variant
  cannot launch: the compile does not check it).
- ``num_ctas > 1``: launch with ``gridDimX = grid_x * num_ctas`` and a cluster of ``cluster_dims``
  (``[num_ctas, 1, 1]``), as Triton's launcher does; ``launch_pdl`` / ``launch_cooperative_grid``: the
  launch attributes of those names.
- ``registers`` and ``spills`` come from ptxas' own report (Triton runs ptxas with ``-v``):
  ``registers`` = "Used N registers", ``spills`` = "N bytes spill stores" (bytes). Triton's
  ``n_regs``/``n_spills`` exist only after loading the cubin on a GPU (and its ``n_spills`` is the
  local-memory size / 4, not spills). ``null`` where ptxas reported nothing.
- ``tensordesc_meta`` is Triton's list of TMA descriptor records for tensor-descriptor *arguments*,
  ``null`` when empty (always, here: the server accepts pointers, scalars and constexprs only). Descriptors
  a kernel makes itself (``tl.make_tensor_descriptor``) need no record but the global scratch: 128 bytes
  per descriptor per program, e.g. ``global_scratch_size`` 256, ``global_scratch_align`` 128 for two.
- For ``arch`` 90 Triton targets ``sm_90a`` (wgmma, TMA): the cubin loads on sm_90 devices only.

Cache
-----
``key`` = sha256 of the canonical JSON of (format version, source, file_name, entry, signature,
constexprs, sorted divisible_by_16, options without nulls, arch, Triton's version). In ``cache_dir``:
``<key>.cubin``, ``<key>.ptx`` and ``<key>.json`` (the result without id/cache_hit/seconds; written
last, so its presence means the entry is complete). Failures are cached too (only ``<key>.json``).
The module source lives in ``src/<sha256 of source>[:16]/<file_name>`` (Triton's JIT reads the source of
its functions from a real file). Every file is written to a unique temporary name and renamed, so any
number of servers can share one cache directory; two servers missing on one key at once both compile
and write identical files. A hit answers the stored result with ``cache_hit: true, seconds: 0``.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import importlib.util
import io
import json
import linecache
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import types
import uuid

from kforge.triton.line_protocol import BadRequest, claim_stdout, request_id, serve

FORMAT_VERSION = 1

# Triton type names the server accepts in a signature (language/__init__.py str_to_ty, Triton 3.6).
SCALAR_TYPES = frozenset({
    "i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64",
    "fp16", "bf16", "fp32", "fp64", "fp8e4nv", "fp8e4b8", "fp8e4b15", "fp8e5", "fp8e5b16",
})

# CUDAOptions fields the server owns or that make no sense in a request.
RESERVED_OPTIONS = frozenset({
    "arch", "backend_name", "warp_size", "extern_libs", "ir_override", "supported_fp8_dtypes",
    "deprecated_fp8_dot_operand_dtypes", "instrumentation_mode",
})
INTEGER_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})

# How many imported source modules stay loaded (a search compiles one source many times).
MODULE_CACHE_SIZE = 8


class SourceFailure(Exception):
    """The source cannot be compiled; its message is the log returned (and cached) for the key."""


# --- requests ---------------------------------------------------------------------------------------

class CompileRequest:
    """A validated compile request. Construction raises BadRequest naming the offending field."""

    def __init__(self, request: dict, option_names: frozenset):
        self.id = request.get("id")
        self.source = _field(request, "source", str)
        self.file_name = _field(request, "file_name", str, default="kernel.py")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*\.py", self.file_name):
            raise BadRequest(f"file_name {self.file_name!r} is not a plain Python file name (name.py)")
        self.entry = _field(request, "entry", str)
        signature = request.get("signature")
        if isinstance(signature, list):
            # Positional: the types of the entry's non-constexpr parameters, in order.
            for i, ty in enumerate(signature):
                if not isinstance(ty, str) or not _is_supported_type(ty) or ty == "constexpr":
                    raise BadRequest(f"signature[{i}]: unsupported type {ty!r} (a pointer '*fp32' or a scalar "
                                     "'i32'/'fp32'/...; constexprs are not listed in a positional signature)")
            self.signature = signature
        else:
            self.signature = _field(request, "signature", dict)
            for name, ty in self.signature.items():
                if not isinstance(ty, str) or not _is_supported_type(ty):
                    raise BadRequest(f"signature[{name!r}]: unsupported type {ty!r} "
                                     "(a pointer '*fp32', a scalar 'i32'/'fp32'/..., or 'constexpr')")
        self.constexprs = _field(request, "constexprs", dict, default={})
        for name, value in self.constexprs.items():
            if not isinstance(value, (bool, int, float, str)) and value is not None:
                raise BadRequest(f"constexprs[{name!r}]: {value!r} is not a number, boolean or string")
        divisible = _field(request, "divisible_by_16", list, default=[])
        positional = isinstance(self.signature, list)
        if not all(isinstance(n, int) if positional else isinstance(n, str) for n in divisible):
            raise BadRequest("divisible_by_16: expected a list of " +
                             ("argument positions (the signature is positional)" if positional else "parameter names"))
        self.divisible_by_16 = sorted(set(divisible))
        self.options = _validated_options(_field(request, "options", dict, default={}), option_names)
        self.arch = _field(request, "arch", int)
        self.cache_dir = _field(request, "cache_dir", str)
        if not os.path.isabs(self.cache_dir):
            raise BadRequest(f"cache_dir {self.cache_dir!r} is not an absolute path")

    def key(self, triton_version: str) -> str:
        """The cache key: sha256 of everything that decides the compiled result."""
        material = {
            "format": FORMAT_VERSION, "source": self.source, "file_name": self.file_name,
            "entry": self.entry, "signature": self.signature, "constexprs": self.constexprs,
            "divisible_by_16": self.divisible_by_16, "options": self.options, "arch": self.arch,
            "triton": triton_version,
        }
        text = json.dumps(material, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _field(request: dict, name: str, kind: type, default=None):
    """request[name], checked to be of `kind`; a missing field takes `default` if one is given."""
    if name not in request:
        if default is not None:
            return default
        raise BadRequest(f"missing field {name!r}")
    value = request[name]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise BadRequest(f"field {name!r}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _is_supported_type(ty: str) -> bool:
    if ty == "constexpr":
        return True
    base = ty[1:] if ty.startswith("*") else ty
    if ty.startswith("*") and base.startswith("k"):
        base = base[1:]
    return base in SCALAR_TYPES


def _validated_options(options: dict, option_names: frozenset) -> dict:
    """The options without nulls (null = not set). Unknown or reserved names are bad requests."""
    result = {}
    for name, value in options.items():
        if name not in option_names:
            raise BadRequest(f"unknown option {name!r} (known: {', '.join(sorted(option_names))})")
        if value is None:
            continue
        if name in INTEGER_OPTIONS and (isinstance(value, bool) or not isinstance(value, int)):
            raise BadRequest(f"option {name!r}: expected an integer or null, got {value!r}")
        result[name] = value
    return result


# --- the cache directory ----------------------------------------------------------------------------

class CacheDir:
    """One cache directory, shared by any number of servers: every write is a rename."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(path, exist_ok=True)

    def file(self, key: str, suffix: str) -> str:
        return os.path.join(self.path, key + suffix)

    def load(self, key: str) -> dict | None:
        """The stored result of `key`, or None when absent or incomplete."""
        try:
            with open(self.file(key, ".json")) as f:
                stored = json.load(f)
        except (OSError, ValueError):
            return None
        if stored.get("ok") and not os.path.exists(self.file(key, ".cubin")):
            return None
        if stored.get("ok"):
            stored["cubin_path"] = self.file(key, ".cubin")
        return stored

    def store(self, key: str, result: dict, cubin: bytes | None, ptx: str | None) -> None:
        """Writes the binaries first and the result JSON last (its presence marks a complete entry)."""
        if cubin is not None:
            atomic_write(self.file(key, ".cubin"), cubin)
        if ptx is not None:
            atomic_write(self.file(key, ".ptx"), ptx.encode())
        stored = {k: v for k, v in result.items() if k != "cubin_path"}
        atomic_write(self.file(key, ".json"), json.dumps(stored, indent=1).encode())

    def source_file(self, source: str, file_name: str) -> str:
        """The path of `source` saved under src/, written once per distinct source text."""
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        path = os.path.join(self.path, "src", digest, file_name)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write(path, source.encode())
        return path


def atomic_write(path: str, data: bytes) -> None:
    """Writes `data` to a unique temporary file beside `path` and renames it onto `path`."""
    tmp = f"{path}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# --- loading the source ------------------------------------------------------------------------------

class ModuleCache:
    """Imports saved sources as fresh modules (unique name per source text), keeping the last few."""

    def __init__(self, capacity: int = MODULE_CACHE_SIZE):
        self.capacity = capacity
        self.modules: collections.OrderedDict[str, types.ModuleType] = collections.OrderedDict()

    def load(self, path: str) -> types.ModuleType:
        """The module of the file at `path` (a content-addressed path). Raises SourceFailure."""
        if path in self.modules:
            self.modules.move_to_end(path)
            return self.modules[path]
        name = "kforge_triton_src_" + hashlib.sha256(path.encode()).hexdigest()[:16]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and friends look their module up while it executes
        try:
            spec.loader.exec_module(module)
        except BaseException as e:  # noqa: B036 - a SystemExit in user code is a failure of the source
            del sys.modules[name]
            raise SourceFailure(_import_failure_log(e, path)) from None
        self.modules[path] = module
        while len(self.modules) > self.capacity:
            old_path, old = self.modules.popitem(last=False)
            sys.modules.pop(old.__name__, None)
            linecache.cache.pop(old_path, None)  # inspect.getsource (Triton's JIT) cached its lines
        return module


def _import_failure_log(error: BaseException, path: str) -> str:
    """'<file>:<line>: <error>' and the traceback frames inside the source file."""
    file_name = os.path.basename(path)
    if isinstance(error, SyntaxError) and error.filename == path:
        head = f"{file_name}:{error.lineno}:{error.offset or 0}: SyntaxError: {error.msg}"
        text = (error.text or "").rstrip("\n")
        caret = " " * max((error.offset or 1) - 1, 0) + "^"
        return f"{head}\n{text}\n{caret}" if text else head
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == path]
    where = f"{file_name}:{frames[-1].lineno}: " if frames else f"{file_name}: "
    head = f"{where}{type(error).__name__}: {error} (while importing the module)"
    lines = [head] + [f"  line {f.lineno}: {f.line}" for f in frames]
    return "\n".join(lines)


# --- compiling ---------------------------------------------------------------------------------------

class Compiler:
    """Compiles validated requests with Triton. Triton is imported once, here."""

    def __init__(self):
        # Triton's own cache goes to a private directory, emptied after each compile: kforge's cache is
        # the one that counts, and a shared Triton cache would only duplicate it.
        self.triton_cache = tempfile.mkdtemp(prefix="kforge-triton-cache-")
        os.environ["TRITON_CACHE_DIR"] = self.triton_cache
        import triton
        from triton import knobs
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import CUDAOptions
        from triton.compiler import ASTSource
        from triton.compiler.errors import CompilationError
        from triton.runtime.jit import JITFunction
        knobs.cache.dir = self.triton_cache
        knobs.nvidia.dump_ptxas_log = True  # ptxas -v output, printed: captured per compile
        self.triton = triton
        self.GPUTarget = GPUTarget
        self.ASTSource = ASTSource
        self.CompilationError = CompilationError
        self.JITFunction = JITFunction
        self.version = triton.__version__
        self.option_names = frozenset(CUDAOptions.__dataclass_fields__) - RESERVED_OPTIONS
        self.modules = ModuleCache()

    def close(self) -> None:
        shutil.rmtree(self.triton_cache, ignore_errors=True)

    def compile(self, req: CompileRequest, cache: CacheDir, key: str) -> tuple[dict, bytes | None, str | None]:
        """(result, cubin, ptx) for a request; a failure of the source is a result with ok false."""
        try:
            fn = self._entry_function(req, cache)
            signature, constexprs = self._bound_signature(req, fn)
            attrs = self._divisibility_attrs(req, fn, signature)
            kernel, ptxas_log = self._run_triton(req, fn, signature, constexprs, attrs)
        except SourceFailure as failure:
            return {"ok": False, "log": str(failure)}, None, None
        params = [name for name, ty in signature.items() if ty != "constexpr"]
        result = {
            "ok": True, "cubin_path": cache.file(key, ".cubin"), "key": key, "name": kernel.metadata.name,
            "metadata": _launch_metadata(kernel.metadata, ptxas_log), "params": params, "log": ptxas_log,
        }
        return result, kernel.asm["cubin"], kernel.asm.get("ptx")

    def _entry_function(self, req: CompileRequest, cache: CacheDir):
        """The @triton.jit function `entry` of the request's source (autotune/heuristics unwrapped)."""
        module = self.modules.load(cache.source_file(req.source, req.file_name))
        if not hasattr(module, req.entry):
            raise SourceFailure(f"{req.file_name}: entry {req.entry!r} is not defined in the module")
        fn = getattr(module, req.entry)
        while not isinstance(fn, self.JITFunction) and hasattr(fn, "fn"):
            fn = fn.fn  # @triton.autotune / @triton.heuristics wrap the JIT function as .fn
        if not isinstance(fn, self.JITFunction):
            raise SourceFailure(f"{req.file_name}: entry {req.entry!r} is not a @triton.jit function "
                                f"(it is {type(fn).__name__})")
        return fn

    def _bound_signature(self, req: CompileRequest, fn) -> tuple[dict, dict]:
        """The signature in parameter order and every constexpr's value (request, else the default)."""
        if isinstance(req.signature, list):
            _name_positional_signature(req, fn)
        names = list(fn.arg_names)
        missing = [n for n in names if n not in req.signature]
        extra = [n for n in req.signature if n not in names]
        if missing or extra:
            raise SourceFailure(
                f"{req.file_name}: the signature does not match {req.entry}({', '.join(names)}): "
                + "; ".join(filter(None, [missing and f"missing {', '.join(missing)}",
                                          extra and f"unknown {', '.join(extra)}"])))
        signature = {n: req.signature[n] for n in names}
        constexprs = {}
        for param in fn.params:
            name = param.name
            if signature[name] != "constexpr":
                if name in req.constexprs:
                    raise SourceFailure(f"{req.file_name}: constexprs gives {name!r}, which the "
                                        f"signature types {signature[name]!r}, not constexpr")
                continue
            if name in req.constexprs:
                constexprs[name] = req.constexprs[name]
            elif param.has_default:
                constexprs[name] = param.default
            else:
                raise SourceFailure(f"{req.file_name}: constexpr {name!r} of {req.entry} has no value "
                                    "(not in constexprs, no default)")
        unknown = [n for n in req.constexprs if n not in names]
        if unknown:
            raise SourceFailure(f"{req.file_name}: constexprs names {', '.join(unknown)}, not parameters "
                                f"of {req.entry}")
        return signature, constexprs

    def _divisibility_attrs(self, req: CompileRequest, fn, signature: dict) -> dict:
        """divisible_by_16 as Triton 3.6's ASTSource attrs: {(parameter index,): [["tt.divisibility", 16]]}
        (what JITFunction builds from the "D" specialisation, backends/compiler.py parse_attr)."""
        attrs = {}
        for name in req.divisible_by_16:
            if name not in signature or signature[name] == "constexpr":
                raise SourceFailure(f"{req.file_name}: divisible_by_16 names {name!r}, which is not a "
                                    f"non-constexpr parameter of {req.entry}")
            attrs[(fn.arg_names.index(name),)] = [["tt.divisibility", 16]]
        return attrs

    def _run_triton(self, req: CompileRequest, fn, signature, constexprs, attrs):
        """triton.compile, with what it prints captured (the ptxas log). Raises SourceFailure."""
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                kernel = self.triton.compile(self.ASTSource(fn, signature, constexprs, attrs),
                                             target=self.GPUTarget("cuda", req.arch, 32),
                                             options=dict(req.options))
        except self.CompilationError as e:
            raise SourceFailure(_compilation_error_log(e, fn, req.file_name)) from None
        except Exception as e:  # ptxas failures, option assertions, internal errors: all data
            raise SourceFailure(_other_error_log(e, req.file_name)) from None
        finally:
            self._empty_triton_cache()
        return kernel, _ptxas_report(printed.getvalue())

    def _empty_triton_cache(self) -> None:
        for entry in os.listdir(self.triton_cache):
            shutil.rmtree(os.path.join(self.triton_cache, entry), ignore_errors=True)


def _name_positional_signature(req: CompileRequest, fn) -> None:
    """A positional signature (the non-constexpr parameters' types in order) as names: the entry's
    parameters annotated tl.constexpr are constexprs, the others take the listed types in order;
    divisible_by_16's positions become those parameters' names."""
    runtime = [p.name for p in fn.params if not p.is_constexpr]
    if len(runtime) != len(req.signature):
        raise SourceFailure(f"{req.file_name}: {req.entry} takes {len(runtime)} non-constexpr parameters "
                            f"({', '.join(runtime)}); the kernel description gives {len(req.signature)} arguments")
    named = {p.name: "constexpr" for p in fn.params if p.is_constexpr}
    named.update(zip(runtime, req.signature))
    bad = [i for i in req.divisible_by_16 if not 0 <= i < len(runtime)]
    if bad:
        raise SourceFailure(f"{req.file_name}: divisible_by_16 names argument positions {bad}, out of range")
    req.divisible_by_16 = [runtime[i] for i in req.divisible_by_16]
    req.signature = named


def _compilation_error_log(error, fn, file_name: str) -> str:
    """'<file>:<line>:<col>: <message>', the source line and a caret, then Triton's own messages.

    An error inside a @jit function called by the kernel arrives as a chain (the call site, then the
    callee); the innermost located one is reported first. Triton counts lines from the 'def' of the
    function it was generating; the function is found among the module's JIT functions by its source
    text to give the line in the file."""
    chain = _error_chain(error)
    located = [e for e in chain if getattr(e, "src", None) is not None and hasattr(getattr(e, "node", None), "lineno")]
    message = _innermost_message(chain)
    if not located:
        return f"{file_name}: {message}\n\n{error}"
    innermost = located[-1]
    node = innermost.node
    def_line = _def_line_of_source(fn, innermost.src)
    where = f"{file_name}:{def_line + node.lineno - 1}:{node.col_offset}" if def_line else file_name
    src_lines = innermost.src.split("\n")
    pointed = ""
    if 0 < node.lineno <= len(src_lines):
        pointed = f"{src_lines[node.lineno - 1]}\n{' ' * node.col_offset}^\n"
    triton_messages = "\n\n".join(str(e) for e in reversed(located))
    return f"{where}: {message}\n{pointed}\n{triton_messages}"


def _error_chain(error) -> list:
    """The error and its causes, outermost first."""
    chain, current = [], error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain


def _innermost_message(chain: list) -> str:
    """The most specific one-line description in an error chain: the innermost Triton error message,
    or the innermost exception that is not a Triton compilation error."""
    message = None
    for current in chain:
        if getattr(current, "error_message", None):
            message = current.error_message
        elif not hasattr(current, "error_message"):
            message = f"{type(current).__name__}: {current}"
    lines = (message or "compilation error").strip().split("\n")
    return lines[-1] or lines[0]


def _def_line_of_source(fn, src: str) -> int | None:
    """The file line of 'def' of the JIT function (fn or any in its module) whose source is `src`."""
    candidates = [fn] + [v for v in fn.__globals__.values() if v is not fn and hasattr(v, "_src")]
    for candidate in candidates:
        if getattr(candidate, "_src", None) == src:
            decorator_lines = next((i for i, text in enumerate(candidate.raw_src)
                                    if re.match(r"\s*def\s", text)), 0)
            return candidate.starting_line_number + decorator_lines
    return None


def _other_error_log(error: Exception, file_name: str) -> str:
    text = str(error).strip() or type(error).__name__
    first = text.split("\n")[0]
    return f"{file_name}: {type(error).__name__}: {first}\n\n{text}"


_PTXAS_KEEP = re.compile(r"ptxas (info|warning|error)|bytes stack frame|spill")


def _ptxas_report(printed: str) -> str:
    """The ptxas -v lines of what Triton printed during a compile."""
    return "\n".join(line for line in printed.splitlines() if _PTXAS_KEEP.search(line))


def _launch_metadata(md, ptxas_log: str) -> dict:
    """What launching the cubin needs, from Triton's metadata, and ptxas' registers and spills."""
    registers = re.search(r"Used (\d+) registers", ptxas_log)
    spills = re.search(r"(\d+) bytes spill stores", ptxas_log)
    return {
        "shared": md.shared,
        "num_warps": md.num_warps,
        "num_ctas": md.num_ctas,
        "cluster_dims": [md.num_ctas, 1, 1],
        "global_scratch_size": md.global_scratch_size or 0,
        "global_scratch_align": md.global_scratch_align or 1,
        "profile_scratch_size": md.profile_scratch_size or 0,
        "profile_scratch_align": md.profile_scratch_align or 1,
        "maxnreg": md.maxnreg,
        "launch_cooperative_grid": bool(md.launch_cooperative_grid),
        "launch_pdl": bool(md.launch_pdl),
        "tensordesc_meta": md.tensordesc_meta or None,
        "registers": int(registers.group(1)) if registers else None,
        "spills": int(spills.group(1)) if spills else None,
    }


# --- the server loop ---------------------------------------------------------------------------------

class Server:
    """Answers requests, one line each. Never raises for a request: every failure is an answer."""

    def __init__(self, out):
        self.out = out
        self.compiler = Compiler()

    def serve(self, lines) -> int:
        return serve(lines, self.out, self.handle,
                     lambda request, message, internal: {"id": request_id(request), "ok": False, "error": message})

    def handle(self, op, request: dict) -> dict:
        if op == "hello":
            return {"ok": True, "triton": self.compiler.version, "python": _python_version(),
                    "pid": os.getpid()}
        if op == "compile":
            return self.compile(request)
        raise BadRequest(f"unknown op {op!r} (hello, compile, exit)")

    def compile(self, request: dict) -> dict:
        req = CompileRequest(request, self.compiler.option_names)
        key = req.key(self.compiler.version)
        cache = CacheDir(req.cache_dir)
        stored = cache.load(key)
        if stored is not None:
            return {"id": req.id, **stored, "cache_hit": True, "seconds": 0}
        start = time.perf_counter()
        result, cubin, ptx = self.compiler.compile(req, cache, key)
        seconds = round(time.perf_counter() - start, 4)
        cache.store(key, result, cubin, ptx)
        print(f"compile_server[{os.getpid()}]: {req.entry} key {key[:12]} "
              f"{'ok' if result['ok'] else 'failed'} in {seconds} s", file=sys.stderr)
        return {"id": req.id, **result, "cache_hit": False, "seconds": seconds}


def _python_version() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])


def main() -> int:
    out = claim_stdout()
    server = Server(out)
    try:
        return server.serve(iter(sys.stdin.readline, ""))
    finally:
        server.compiler.close()


if __name__ == "__main__":
    sys.exit(main())
