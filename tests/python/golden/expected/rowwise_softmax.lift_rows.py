"""Row-wise softmax of a 2D tensor, one program per row block (written for kforge's source-operator tests)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                  BLOCK_COLS: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr):
    first_row = tl.program_id(0) * ROWS_PER_PROGRAM
    cols = tl.arange(0, BLOCK_COLS)
    col_ok = cols < n_cols
    for r in range(ROWS_PER_PROGRAM):
        row = first_row + r
        if row < n_rows:
            x = tl.load(in_ptr + row * in_row_stride + cols, mask=col_ok, other=-float("inf"))
            x = x - tl.max(x, axis=0)
            e = tl.exp(x)
            tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0), mask=col_ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    # A whole row lives in registers: the block must cover it.
    block_cols = triton.next_power_of_2(n_cols)
    ROWS_PER_PROGRAM = {ROWS_PER_PROGRAM}  # rows handled by one program
    grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
    _softmax_rows[grid](
        y, x, x.stride(0), y.stride(0), n_rows, n_cols,
        BLOCK_COLS=block_cols,
        ROWS_PER_PROGRAM=ROWS_PER_PROGRAM,
        num_warps=8,
    )
    return y
