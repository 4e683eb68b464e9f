"""Planted faults for the Triton path (kforge's GPU tests): a copy y = x whose PLANT parameter breaks it.

PLANT 0: correct; 1: stores far out of bounds (a fault: crashed); 2: never ends (the watchdog: timeout);
4: one element wrong (wrong_result); 5: one element never written (wrong_result, the poisoned output).
"""
import triton
import triton.language as tl


@triton.jit
def planted(x_ptr, y_ptr, n, PLANT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if PLANT == 1:
        tl.store(y_ptr + offs + (1 << 34), x)
    if PLANT == 2:
        # Spins on the first output element, poisoned (NaN) before the kernel runs: NaN != NaN forever.
        # (A loop without memory side effects, i = i * 1, was compiled away on the H200: measured 0.004 ms.)
        y0 = tl.load(y_ptr, volatile=True)
        while y0 != y0:
            y0 = tl.load(y_ptr, volatile=True)
    if PLANT == 4:
        x = tl.where(offs == n // 2, x + 1.0, x)
    if PLANT == 5:
        mask = mask & (offs != 7)
    tl.store(y_ptr + offs, x, mask=mask)


@triton.jit
def planted_reference(x_ptr, y_ptr, n, PLANT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
