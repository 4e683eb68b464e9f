"""Row layer normalisation of a [rows x cols] f32 matrix with per-column gamma and beta, for kforge's Triton
suite: y = (x - mean) / sqrt(var + eps) * gamma + beta, var the biased variance of the row.

layernorm_kernel: a program handles ROWS rows. Rows of at most BLOCK columns are read once and kept in
registers (mean, then the variance of the centred values); longer rows are read in chunks of BLOCK
columns: one pass accumulates the sum and the sum of squares in f32, a second pass normalises and writes. Every parameter value is valid for
every shape (BLOCK need not cover a row).

layernorm_reference: the same signature, launched with the default configuration's grid; one row at a time
in three passes (mean; variance of the centred values; write) over fixed 128-column chunks.
"""
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, gamma_ptr, beta_ptr, y_ptr, rows, cols, eps,
                     BLOCK: tl.constexpr, ROWS: tl.constexpr):
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = row < rows
    row_start = row.to(tl.int64) * cols
    if cols <= BLOCK:  # the rows fit in one chunk: read once, keep them in registers
        col = tl.arange(0, BLOCK)
        col_ok = col < cols
        ok = row_ok[:, None] & col_ok[None, :]
        x = tl.load(x_ptr + row_start[:, None] + col[None, :], mask=ok, other=0.0)
        mean = tl.sum(x, axis=1) / cols
        centred = tl.where(ok, x - mean[:, None], 0.0)
        inv_std = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / cols + eps)
        gamma = tl.load(gamma_ptr + col, mask=col_ok, other=0.0)
        beta = tl.load(beta_ptr + col, mask=col_ok, other=0.0)
        tl.store(y_ptr + row_start[:, None] + col[None, :],
                 centred * inv_std[:, None] * gamma[None, :] + beta[None, :], mask=ok)
        return
    total = tl.zeros([ROWS], tl.float32)
    total_sq = tl.zeros([ROWS], tl.float32)
    for first in range(0, cols, BLOCK):
        col = first + tl.arange(0, BLOCK)
        ok = row_ok[:, None] & (col < cols)[None, :]
        x = tl.load(x_ptr + row_start[:, None] + col[None, :], mask=ok, other=0.0)
        total += tl.sum(x, axis=1)
        total_sq += tl.sum(x * x, axis=1)
    mean = total / cols
    var = tl.maximum(total_sq / cols - mean * mean, 0.0)
    inv_std = 1.0 / tl.sqrt(var + eps)
    for first in range(0, cols, BLOCK):
        col = first + tl.arange(0, BLOCK)
        col_ok = col < cols
        ok = row_ok[:, None] & col_ok[None, :]
        x = tl.load(x_ptr + row_start[:, None] + col[None, :], mask=ok, other=0.0)
        gamma = tl.load(gamma_ptr + col, mask=col_ok, other=0.0)
        beta = tl.load(beta_ptr + col, mask=col_ok, other=0.0)
        y = (x - mean[:, None]) * inv_std[:, None] * gamma[None, :] + beta[None, :]
        tl.store(y_ptr + row_start[:, None] + col[None, :], y, mask=ok)


@triton.jit
def layernorm_reference(x_ptr, gamma_ptr, beta_ptr, y_ptr, rows, cols, eps,
                        BLOCK: tl.constexpr, ROWS: tl.constexpr):
    CHUNK: tl.constexpr = 128
    for r in range(ROWS):
        row = tl.program_id(0) * ROWS + r
        if row < rows:
            start = row.to(tl.int64) * cols
            total = 0.0
            for first in range(0, cols, CHUNK):
                col = first + tl.arange(0, CHUNK)
                total += tl.sum(tl.load(x_ptr + start + col, mask=col < cols, other=0.0), axis=0)
            mean = total / cols
            squares = 0.0
            for first in range(0, cols, CHUNK):
                col = first + tl.arange(0, CHUNK)
                centred = tl.where(col < cols, tl.load(x_ptr + start + col, mask=col < cols, other=0.0) - mean, 0.0)
                squares += tl.sum(centred * centred, axis=0)
            inv_std = 1.0 / tl.sqrt(squares / cols + eps)
            for first in range(0, cols, CHUNK):
                col = first + tl.arange(0, CHUNK)
                ok = col < cols
                x = tl.load(x_ptr + start + col, mask=ok, other=0.0)
                gamma = tl.load(gamma_ptr + col, mask=ok, other=0.0)
                beta = tl.load(beta_ptr + col, mask=ok, other=0.0)
                tl.store(y_ptr + start + col, (x - mean) * inv_std * gamma + beta, mask=ok)
