"""kforge.triton.bounded_compile: Triton's compile in a forked child with a time limit (real sm_90
compiles on the CPU, no GPU): the kernel comes back, a compile past the limit is CompileTimeout and leaves
no process behind, a compile error comes back as the child's text, and without a limit nothing forks."""
import os

import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from kforge.triton import bounded_compile as bc  # noqa: E402
from kforge.triton import program_worker as pw  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


@triton.jit
def bad_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)  # BLOCK 3: arange needs a power of two


def source(fn, block):
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"} if fn is scale_kernel \
        else {"x_ptr": "*fp32", "BLOCK": "constexpr"}
    return ASTSource(fn=fn, signature=sig, constexprs={"BLOCK": block})


@pytest.fixture()
def bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))  # nothing compiled before
    bc.around(None)  # not an earlier test's worker
    assert bc.install()
    yield triton.compiler.compile
    bc.limit(None)
    bc.around(None)
    bc.uninstall()


def gone(pid):
    """The child was reaped and nothing of its process group (an assembler) is left."""
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    return True


class Boom(Exception):
    """An exception that survives pickling: the parent re-raises it as its own type."""


class Unpicklable(Exception):
    def __init__(self, a, b):  # pickling keeps args=(message,): it cannot be rebuilt
        super().__init__(f"{a} {b}")


def test_installed_in_place_of_tritons_compile(bounded):
    assert bounded is bc.bounded
    bc.uninstall()
    assert triton.compiler.compile is not bc.bounded
    assert bc.install()


def test_a_compile_within_the_limit_returns_the_kernel_from_the_childs_cache(bounded, tmp_path, monkeypatch):
    hits = []  # the listener runs in this process only for the parent's own compile
    monkeypatch.setattr(triton.knobs.compilation, "listener", lambda **kw: hits.append(kw["cache_hit"]))
    bc.limit(120)
    kernel = bounded(source(scale_kernel, 128), target=TARGET, options={"num_warps": 4})
    assert len(kernel.asm["cubin"]) > 1000
    assert hits == [True]  # compiled once, by the child
    assert any(f.endswith(".cubin") for _, _, fs in os.walk(tmp_path / "triton-cache") for f in fs)
    assert gone(bc.last_child_pid)


def test_a_compile_past_the_limit_is_a_timeout_and_the_child_is_gone(bounded):
    bc.limit(0.01)  # a first compile of a kernel takes tenths of a second here
    with pytest.raises(bc.CompileTimeout, match="longer than 0.01 s"):
        bounded(source(scale_kernel, 256), target=TARGET, options={"num_warps": 4})
    assert gone(bc.last_child_pid)
    assert not pw._is_compile_timeout(RuntimeError("unrelated"))
    try:
        try:
            raise bc.CompileTimeout("x")
        except bc.CompileTimeout as inner:
            raise RuntimeError("the wrapper's error") from inner
    except RuntimeError as outer:
        assert pw._is_compile_timeout(outer)  # found through the chain of causes


def test_a_compile_error_comes_back_with_the_childs_traceback(bounded):
    bc.limit(120)
    with pytest.raises(Exception) as e:
        bounded(source(bad_kernel, 3), target=TARGET, options={"num_warps": 4})
    assert pw._is_compile_error(e.value)  # Triton's own type if it pickles, else ChildCompileError
    assert "arange" in pw._failure_text(e.value, limit=100000)
    assert gone(bc.last_child_pid)


def test_the_childs_exception_keeps_its_type_where_it_pickles(bounded, monkeypatch):
    """Triton's autotuner skips a configuration by the exception's type (PTXASError, ...)."""
    bc.limit(120)
    with monkeypatch.context() as m:  # undone before the fixture puts Triton's compile back
        m.setattr(bc, "_real_compile", lambda *a, **k: (_ for _ in ()).throw(Boom("ptxas said no")))
        with pytest.raises(Boom, match="ptxas said no") as e:
            bounded(source(scale_kernel, 16), target=TARGET)
        assert isinstance(e.value.__cause__, bc.ChildCompileError) and "Boom" in str(e.value.__cause__)
        m.setattr(bc, "_real_compile", lambda *a, **k: (_ for _ in ()).throw(Unpicklable("x", "y")))
        with pytest.raises(bc.ChildCompileError, match="Unpicklable: x y"):
            bounded(source(scale_kernel, 16), target=TARGET)


def test_the_child_never_returns_into_the_callers_code(bounded, monkeypatch, tmp_path):
    """Even when reporting its failure fails, the child leaves by os._exit: had it returned, it would run
    the rest of this test (and of the session) as a second process."""
    bc.limit(120)
    me = os.getpid()
    with monkeypatch.context() as m:  # undone before the fixture puts Triton's compile back
        m.setattr(bc, "_real_compile", lambda *a, **k: (_ for _ in ()).throw(Boom("no")))
        m.setattr(bc, "_send", lambda fd, e: (_ for _ in ()).throw(KeyboardInterrupt()))
        with pytest.raises(bc.ChildCompileError, match="no report"):
            bounded(source(scale_kernel, 16), target=TARGET)
    (tmp_path / f"after-{os.getpid()}").write_text("")
    if os.getpid() != me:  # pragma: no cover (only an escaped child gets here)
        os._exit(3)
    assert [p.name for p in tmp_path.glob("after-*")] == [f"after-{me}"]


def test_without_a_limit_nothing_forks(bounded, monkeypatch):
    monkeypatch.setattr(os, "fork", lambda: pytest.fail("forked without a limit"))
    bc.limit(0)
    kernel = bounded(source(scale_kernel, 64), target=TARGET, options={"num_warps": 4})
    assert len(kernel.asm["cubin"]) > 1000


def test_tritons_jit_compiles_through_the_bound(bounded):
    """The path the worker relies on: a JITFunction binds ``triton.compiler.compile`` when it first runs
    on a device (``create_binder``), so a kernel first run after ``install()`` compiles bounded."""
    import autotune_fixture as fx
    from triton.runtime.driver import driver

    @triton.jit
    def doubled(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)

    before = driver._active  # None here (no GPU); reset_active() would look for a real driver
    fx.use_fake_driver()
    try:
        x, out = fx.tensor([1.0] * 8), fx.tensor([0.0] * 8)
        bc.limit(0.01)
        with pytest.raises(bc.CompileTimeout):
            doubled.warmup(x, out, 8, BLOCK=32, grid=(1,))
        assert gone(bc.last_child_pid)
        bc.limit(120)
        kernel = doubled.warmup(x, out, 8, BLOCK=32, grid=(1,))
        assert len(kernel.asm["cubin"]) > 1000
    finally:
        driver._active = before


def test_every_compile_runs_inside_the_around_context(bounded):
    import contextlib
    events = []

    @contextlib.contextmanager
    def recorder():
        events.append("enter")
        try:
            yield
        finally:
            events.append("exit")

    bc.around(recorder)
    bc.limit(None)
    bounded(source(scale_kernel, 32), target=TARGET, options={"num_warps": 4})
    bc.limit(120)
    with pytest.raises(Exception):
        bounded(source(bad_kernel, 3), target=TARGET, options={"num_warps": 4})
    assert events == ["enter", "exit", "enter", "exit"]


def test_a_fork_that_fails_falls_back_to_the_plain_compile(bounded, monkeypatch, capsys):
    def no_fork():
        raise OSError(12, "Cannot allocate memory")
    monkeypatch.setattr(os, "fork", no_fork)
    bc.limit(120)
    kernel = bounded(source(scale_kernel, 512), target=TARGET, options={"num_warps": 4})
    assert len(kernel.asm["cubin"]) > 1000
    assert "cannot fork" in capsys.readouterr().err
