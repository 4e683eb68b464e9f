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
    assert bc.install()
    yield triton.compiler.compile
    bc.limit(None)
    bc.around(None)
    bc.uninstall()


def no_children():
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)
    return True


def test_installed_in_place_of_tritons_compile(bounded):
    assert bounded is bc.bounded
    bc.uninstall()
    assert triton.compiler.compile is not bc.bounded
    assert bc.install()


def test_a_compile_within_the_limit_returns_the_kernel_from_the_childs_cache(bounded, tmp_path):
    bc.limit(120)
    kernel = bounded(source(scale_kernel, 128), target=TARGET, options={"num_warps": 4})
    assert len(kernel.asm["cubin"]) > 1000
    assert any(f.endswith(".cubin") for _, _, fs in os.walk(tmp_path / "triton-cache") for f in fs)
    assert no_children()


def test_a_compile_past_the_limit_is_a_timeout_and_the_child_is_gone(bounded):
    bc.limit(0.01)  # a first compile of a kernel takes tenths of a second here
    with pytest.raises(bc.CompileTimeout, match="longer than 0.01 s"):
        bounded(source(scale_kernel, 256), target=TARGET, options={"num_warps": 4})
    assert no_children()
    assert not pw._is_compile_timeout(RuntimeError("unrelated"))
    try:
        try:
            raise bc.CompileTimeout("x")
        except bc.CompileTimeout as inner:
            raise RuntimeError("the wrapper's error") from inner
    except RuntimeError as outer:
        assert pw._is_compile_timeout(outer)  # found through the chain of causes


def test_a_compile_error_comes_back_as_the_childs_text(bounded):
    bc.limit(120)
    with pytest.raises(bc.ChildCompileError, match="arange") as e:
        bounded(source(bad_kernel, 3), target=TARGET, options={"num_warps": 4})
    assert pw._is_compile_error(e.value)
    assert no_children()


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
        assert no_children()
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
    with pytest.raises(bc.ChildCompileError):
        bounded(source(bad_kernel, 3), target=TARGET, options={"num_warps": 4})
    assert events == ["enter", "exit", "enter", "exit"]
