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
child and raises ``CompileTimeout``. After the child succeeded, the parent's own compile finds the kernel in
the cache (no second compile). A child that fails sends its exception's text back, raised here as
``ChildCompileError``: one compile per variant, never two.

``around(factory)`` sets a context entered around every compile: the program worker lets go of the GPU's
shared lock there, so a compile inside a check does not hold off another worker's timing.

Contract: the child only compiles for the given target (no driver call: Triton compiles sm_90 without a
GPU), leaves by ``os._exit`` (no atexit handlers, no CUDA teardown of the parent's context), and shares
nothing else with the parent. Without a limit (None or <= 0), or where ``fork`` is unavailable,
``bounded`` is Triton's compile unchanged.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
import warnings

_real_compile = None
_limit_s: float | None = None
_around = contextlib.nullcontext  # a context entered around every compile (the worker's lock release)
POLL_S = 0.005


class CompileTimeout(Exception):
    """Triton's compile of a kernel took longer than the limit (the variant is a ``timeout`` trial)."""


class ChildCompileError(Exception):
    """Triton's compile failed in the child; the message is the child's traceback."""


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
        if _limit_s is None or not hasattr(os, "fork"):
            return _real_compile(src, target=target, options=options, **kwargs)
        _compile_in_child(src, target, options, kwargs, _limit_s)
        return _real_compile(src, target=target, options=options, **kwargs)  # from the cache


def _compile_in_child(src, target, options, kwargs, seconds: float) -> None:
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # "use of fork() may lead to deadlocks": the limit bounds that too
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: compile, report, leave without running the parent's exit handlers
        os.close(read_end)
        os.setpgid(0, 0)  # its own group: a kill reaches the assembler it may be running too
        code = 0
        try:
            _real_compile(src, target=target, options=options, **kwargs)
        except BaseException as e:  # noqa: BLE001 (everything goes back to the parent as text)
            code = 1
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-8000:]
            try:
                os.write(write_end, text.encode("utf-8", "replace"))
            except OSError:
                pass
        os._exit(code)
    os.close(write_end)
    try:
        status = _wait(pid, seconds)
        if status is None:
            _kill(pid)
            name = getattr(getattr(src, "fn", None), "__name__", None) or getattr(src, "name", "kernel")
            raise CompileTimeout(f"Triton's compile of {name} took longer than {seconds:g} s (killed)")
        message = _read_all(read_end)
    finally:
        os.close(read_end)
    if os.waitstatus_to_exitcode(status) != 0:
        raise ChildCompileError(message or f"the compile process ended with status {status}")


def _wait(pid: int, seconds: float):
    """The child's wait status, or None if it is still running after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def _kill(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
    os.waitpid(pid, 0)


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks).decode("utf-8", "replace")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("a library module: see the program worker")
