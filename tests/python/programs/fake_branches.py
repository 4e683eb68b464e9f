"""A program for the program worker's fake device whose knobs do not all run: a launch on a branch the
inputs never take, and a wrapper nothing calls (program_worker.knobs_not_run)."""
from kforge.triton.program_devices import fake_empty
from kforge.triton.program_devices import fake_tl as tl
from kforge.triton.program_devices import fake_triton as triton


@triton.jit
def scale_kernel(x, out, alpha, BLOCK: tl.constexpr):
    out[...] = alpha * x


def branchy(x, y, alpha, big=False, BLOCK=64):
    out = fake_empty(x.shape, x.dtype)
    if big:
        scale_kernel[(1,)](x, out, alpha, BLOCK=BLOCK, num_warps=8)
    else:
        scale_kernel[(1,)](x, out, alpha, BLOCK=BLOCK,
                           num_warps=4)
    return out


def unused(x, TILE=32):
    out = fake_empty(x.shape, x.dtype)
    scale_kernel[(1,)](x, out, 1.0, BLOCK=TILE)
    return out
