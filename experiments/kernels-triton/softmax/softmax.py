"""Row softmax of a [rows x cols] f32 matrix, y = exp(x - max) / sum(exp(x - max)), for kforge's Triton suite.

softmax_kernel: a program handles ROWS rows. Rows of at most BLOCK columns are read once and kept in
registers; longer rows are read in chunks of BLOCK columns twice: an online pass keeps the running maximum
and the rescaled sum, a second pass writes the probabilities. BLOCK need not cover a row, so every
parameter value is valid for every shape.

softmax_reference: the same signature, launched with the default configuration's grid; it handles the
same rows one at a time in three plain passes (maximum, sum, write) over fixed 128-column chunks.
"""
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = row < rows
    row_start = row.to(tl.int64) * cols
    if cols <= BLOCK:  # the rows fit in one chunk: read once, keep them in registers
        col = tl.arange(0, BLOCK)
        ok = row_ok[:, None] & (col < cols)[None, :]
        x = tl.load(x_ptr + row_start[:, None] + col[None, :], mask=ok, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = e * (1.0 / tl.sum(e, axis=1))[:, None]
        tl.store(y_ptr + row_start[:, None] + col[None, :], y, mask=ok)
        return
    running_max = tl.full([ROWS], -float("inf"), tl.float32)
    running_sum = tl.zeros([ROWS], tl.float32)
    for first in range(0, cols, BLOCK):
        col = first + tl.arange(0, BLOCK)
        ok = row_ok[:, None] & (col < cols)[None, :]
        x = tl.load(x_ptr + row_start[:, None] + col[None, :], mask=ok, other=-float("inf"))
        new_max = tl.maximum(running_max, tl.max(x, axis=1))
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(tl.exp(x - new_max[:, None]), axis=1)
        running_max = new_max
    scale = 1.0 / running_sum
    for first in range(0, cols, BLOCK):
        col = first + tl.arange(0, BLOCK)
        ok = row_ok[:, None] & (col < cols)[None, :]
        x = tl.load(x_ptr + row_start[:, None] + col[None, :], mask=ok, other=0.0)
        y = tl.exp(x - running_max[:, None]) * scale[:, None]
        tl.store(y_ptr + row_start[:, None] + col[None, :], y, mask=ok)


@triton.jit
def softmax_reference(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    CHUNK: tl.constexpr = 128
    for r in range(ROWS):
        row = tl.program_id(0) * ROWS + r
        if row < rows:
            start = row.to(tl.int64) * cols
            largest = -float("inf")
            for first in range(0, cols, CHUNK):
                col = first + tl.arange(0, CHUNK)
                x = tl.load(x_ptr + start + col, mask=col < cols, other=-float("inf"))
                largest = tl.maximum(largest, tl.max(x, axis=0))
            total = 0.0
            for first in range(0, cols, CHUNK):
                col = first + tl.arange(0, CHUNK)
                x = tl.load(x_ptr + start + col, mask=col < cols, other=-float("inf"))
                total += tl.sum(tl.exp(x - largest), axis=0)
            for first in range(0, cols, CHUNK):
                col = first + tl.arange(0, CHUNK)
                x = tl.load(x_ptr + start + col, mask=col < cols, other=0.0)
                tl.store(y_ptr + start + col, tl.exp(x - largest) / total, mask=col < cols)
