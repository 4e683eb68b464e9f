"""Triton's compile with a time limit, for the program worker.

Why: Triton's JIT compiles a variant at its first call, inside the worker, and some configurations take
longer to compile than a whole search budget (measured here, CPU only, sm_90: TritonBench-G's
attention_llama at BLOCK 64 in 1.8 s, 256 in 38 s, 512 in 44 s, 1024 more than 240 s). A worker stuck in
such a compile answers nothing until the runner's request timeout kills it; with two workers per GPU, two
such draws stopped a 30 s search after its first 10 s (TritonBench-G campaign, 2026-12-06).

How: ``install()`` replaces ``triton.compiler.compile`` (the function every ``JITFunction`` binds when it
first runs on a device, so install before any kernel runs) by ``bounded``. While a limit is set
(``limit(seconds)``), ``bounded`` forks; the child runs Triton's compile, which stores the kernel in
Triton's on-disk cache ($TRITON_CACHE_DIR), and exits; the parent waits at most the limit, then kills the
child's process group (the assembler with it) and raises ``CompileTimeout``. After the child succeeded,
the parent's own compile finds the kernel in the cache (no second compile). A child that fails sends its
exception back: re-raised as its own type where it survives pickling (Triton's autotuner skips a
configuration by the exception's type), else as ``ChildCompileError``, with the child's traceback as the
cause either way. ``around(factory)`` sets a context entered around every compile: the program worker
lets go of the GPU's shared lock there, so a compile inside a check does not hold off another worker's
timing.

Contract of the child: it only compiles, for a target resolved in the parent (no driver call: Triton
compiles sm_90 without a GPU); it closes every inherited descriptor but its pipe (the worker's protocol,
its stdin and the GPU lock's file stay the parent's), dies with the parent (PR_SET_PDEATHSIG), writes its
temporary files in a folder the parent removes, and leaves only by ``os._exit`` (no exit handlers, no
return into the caller's code, whatever fails). Without a limit (None or <= 0), where ``fork`` is
unavailable or fails (a note on stderr, once), or with Triton's ``always_compile`` on (the parent would
compile again), ``bounded`` is Triton's compile unchanged. A cache manager that does not persist across
processes makes the parent compile a second time, unbounded.

``python -m kforge.triton.bounded_compile --check`` checks all of this on a GPU machine (one JSON line;
exit 1 on a failure): scripts/device-tritonbench-g runs it before a chunk.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings

_real_compile = None
_limit_s: float | None = None
_around = contextlib.nullcontext  # a context entered around every compile (the worker's lock release)
last_child_pid: int | None = None  # the latest child (tests)
TIMEOUT_MARK = "took longer than"  # in every CompileTimeout's message: how records and reports find them
POLL_S = 0.005
TEXT_LIMIT = 8000


class CompileTimeout(Exception):
    """Triton's compile of a kernel took longer than the limit (the variant is a ``timeout`` trial)."""


class ChildCompileError(Exception):
    """Triton's compile failed in the child; the message is the child's traceback."""


class _ForkFailed(Exception):
    """os.fork raised (its OSError is the cause)."""


_noted: set = set()


def _note_once(text: str) -> None:
    if text not in _noted:
        _noted.add(text)
        print(text, file=sys.stderr, flush=True)


def install() -> bool:
    """Put ``bounded`` in place of ``triton.compiler.compile``; False if Triton is not importable.
    Idempotent."""
    global _real_compile
    try:
        import triton.compiler as tc
    except ImportError:
        return False
    if _real_compile is None:
        _real_compile = tc.compile
        tc.compile = bounded
    return True


def uninstall() -> None:
    """Put Triton's compile back (tests)."""
    global _real_compile
    if _real_compile is not None:
        import triton.compiler as tc
        tc.compile = _real_compile
        _real_compile = None


def limit(seconds: float | None) -> None:
    """The limit for the compiles that follow (None or <= 0: none)."""
    global _limit_s
    _limit_s = seconds if seconds and seconds > 0 else None


def around(factory) -> None:
    """``factory()`` is a context entered around every compile from now on (None: nothing)."""
    global _around
    _around = factory or contextlib.nullcontext


def bounded(src, target=None, options=None, **kwargs):
    """Triton's compile of ``src``, in a forked child bounded by the limit (see the module's contract),
    inside the ``around`` context."""
    if _real_compile is None:
        raise RuntimeError("bounded_compile.install() was not called")
    with _around():
        if _limit_s is None or not hasattr(os, "fork") or _always_compiles():
            return _real_compile(src, target=target, options=options, **kwargs)
        if target is None:  # resolved here: the child must not call the driver
            from triton.runtime.driver import driver
            target = driver.active.get_current_target()
        try:
            _compile_in_child(src, target, options, kwargs, _limit_s)
        except _ForkFailed as e:  # no child to be had (memory, process limits): compile here, unbounded
            _note_once(f"bounded_compile: cannot fork ({e.__cause__}); compiling without the time limit")
        return _real_compile(src, target=target, options=options, **kwargs)  # from the cache


def _always_compiles() -> bool:
    try:
        from triton import knobs
        return bool(knobs.compilation.always_compile)
    except (ImportError, AttributeError):
        return False


# --- the child ----------------------------------------------------------------------------------------

def _compile_in_child(src, target, options, kwargs, seconds: float) -> None:
    global last_child_pid
    scratch = tempfile.mkdtemp(prefix="kforge-compile-")
    read_end, write_end = os.pipe()
    parent = os.getpid()
    try:
        with warnings.catch_warnings():  # "use of fork() may lead to deadlocks": the limit bounds that too
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except BaseException as e:
        os.close(read_end)
        os.close(write_end)
        shutil.rmtree(scratch, ignore_errors=True)
        if isinstance(e, OSError):
            raise _ForkFailed() from e
        raise
    if pid == 0:
        _child(src, target, options, kwargs, read_end, write_end, parent, scratch)  # never returns
    last_child_pid = pid
    os.close(write_end)
    reaped = False
    try:
        status, message = _wait(pid, read_end, seconds)
        if status is None:
            name = getattr(getattr(src, "fn", None), "__name__", None) or getattr(src, "name", "kernel")
            raise CompileTimeout(f"Triton's compile of {name} {TIMEOUT_MARK} {seconds:g} s (killed)")
        reaped = True
    finally:
        if not reaped:
            _kill(pid)
        os.close(read_end)
        shutil.rmtree(scratch, ignore_errors=True)
    if os.waitstatus_to_exitcode(status) != 0:
        _raise_childs(message, status)


def _child(src, target, options, kwargs, read_end: int, write_end: int, parent: int, scratch: str):
    """The forked child's whole life: compile, report a failure, ``os._exit`` whatever happens."""
    code = 1
    try:
        os.close(read_end)
        _die_with(parent)
        os.setpgid(0, 0)  # its own group: a kill reaches the assembler it may be running too
        _close_inherited(keep=write_end)
        os.environ["TMPDIR"] = scratch
        tempfile.tempdir = scratch
        try:
            _real_compile(src, target=target, options=options, **kwargs)
            code = 0
        except BaseException as e:  # noqa: BLE001 (everything goes back to the parent)
            _send(write_end, e)
    finally:
        os._exit(code)


def _die_with(parent: int) -> None:
    """The kernel kills this process when its parent dies (Linux), and it leaves at once if that already
    happened."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _close_inherited(keep: int) -> None:
    try:
        fds = [int(f) for f in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 4096))
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _send(fd: int, error: BaseException) -> None:
    """The failure as (traceback text, pickled exception or None), pickled, down the pipe."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))[-TEXT_LIMIT:]
    try:
        exc = pickle.dumps(error.with_traceback(None))
        pickle.loads(exc)  # it must come back to life in the parent too
    except Exception:  # noqa: BLE001 (an exception that does not pickle goes back as text)
        exc = None
    data = pickle.dumps((text, exc))
    while data:
        data = data[os.write(fd, data):]


# --- the parent ---------------------------------------------------------------------------------------

def _wait(pid: int, fd: int, seconds: float):
    """(wait status, bytes the child sent), reading the pipe meanwhile so a long report cannot block the
    child; (None, b"") if the child still runs after ``seconds`` (not reaped then)."""
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    pipe_open = True
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            while pipe_open and select.select([fd], [], [], 0)[0]:
                b = os.read(fd, 65536)
                pipe_open = bool(b)
                chunks.append(b)
            return status, b"".join(chunks)
        left = deadline - time.monotonic()
        if left <= 0:
            return None, b""
        if pipe_open and select.select([fd], [], [], min(POLL_S, left))[0]:
            b = os.read(fd, 65536)
            pipe_open = bool(b)
            chunks.append(b)
        elif not pipe_open:
            time.sleep(min(POLL_S, left))


def _kill(pid: int) -> None:
    """Kills the child's group (and the child, had it no group yet) and reaps it."""
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _raise_childs(message: bytes, status: int):
    text, exc = "", None
    try:
        text, pickled = pickle.loads(message)
        exc = pickle.loads(pickled) if pickled else None
    except Exception:  # noqa: BLE001 (no report, or one that does not unpickle here)
        pass
    cause = ChildCompileError(text or f"the compile process ended with status {status} and no report")
    if isinstance(exc, BaseException):
        raise exc from cause
    raise cause


# --- the GPU check -------------------------------------------------------------------------------------

def gpu_check() -> dict:
    """On a GPU, in a process that has initialised CUDA (as the program worker has): a kernel compiled
    through the bound and launched gives the right answer, a compile past a tiny limit is a
    CompileTimeout, and the CUDA context still works after the killed child. Raises on any failure."""
    import torch
    import triton
    import triton.language as tl

    torch.zeros(1, device="cuda")  # CUDA initialised before the first fork, as in the worker
    install()
    results = {}

    @triton.jit
    def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    limit(60)
    t0 = time.perf_counter()
    twice[(4,)](x, out, 1000, BLOCK=256)
    torch.cuda.synchronize()
    results["bounded_compile_and_launch_s"] = round(time.perf_counter() - t0, 3)
    if not torch.equal(out, 2 * x):
        raise AssertionError("the kernel compiled through the bound computed a wrong result")
    limit(0.001)
    try:
        twice[(1,)](x, out, 1000, BLOCK=1024)  # a new specialisation: compiled again, past the limit
        raise AssertionError("a compile past a 1 ms limit was not stopped")
    except CompileTimeout:
        results["timeout"] = "raised"
    limit(None)
    y = x + 1  # the context survives the killed child
    torch.cuda.synchronize()
    if float(y[999]) != 1000.0:
        raise AssertionError("CUDA gave a wrong result after the compile child was killed")
    results["context_after_kill"] = "ok"
    return results


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        import json
        try:
            print(json.dumps({"ok": True, **gpu_check()}))
        except Exception as e:  # noqa: BLE001 (the check's verdict, on stdout)
            print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
            sys.exit(1)
        sys.exit(0)
    sys.exit("usage: python -m kforge.triton.bounded_compile --check   (on a GPU machine)")
