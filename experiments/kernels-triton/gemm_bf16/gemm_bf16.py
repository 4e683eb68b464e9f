"""C = A @ B with bf16 A [M x K] and B [K x N], f32 accumulation and f32 C, all row-major, for kforge's Triton
suite.

gemm_bf16_kernel: one program per BLOCK_M x BLOCK_N tile of C; programs are ordered in groups of GROUP_M
tile rows (the tiles of B a group needs stay in L2 while the group runs); the K loop loads BLOCK_K-deep
slices through pointers (masked at the K tail) and accumulates with tl.dot in f32; Triton pipelines the
loop over num_stages buffers. Rows of A beyond M read row 0 (valid addresses); columns of B beyond N are
masked, not redirected: a tl.where on the column index hides its contiguity from Triton, which then loads
B element by element outside the pipeline (measured on the H200: 1.19 ms at best at 4096^3, every
configuration; with the mask, B's slices go through cp.async like A's). Neither is ever stored.

gemm_bf16_reference: the same signature, launched with the default configuration's grid; tiles in plain
row-major order, every load masked, the products formed from f32 copies of the operands with an IEEE f32
dot (CUDA cores, no tensor cores), in fixed 32-deep K slices.
"""
import triton
import triton.language as tl


@triton.jit
def gemm_bf16_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    programs_per_group = GROUP_M * tiles_n
    first_tile_m = (pid // programs_per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_tile_m, GROUP_M)
    tile_m = first_tile_m + (pid % programs_per_group) % group_rows
    tile_n = (pid % programs_per_group) // group_rows

    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    depth = tl.arange(0, BLOCK_K)
    safe_rows = tl.where(rows < M, rows, 0)
    a_tile = a_ptr + safe_rows.to(tl.int64)[:, None] * K + depth[None, :]
    b_tile = b_ptr + depth.to(tl.int64)[:, None] * N + cols[None, :]
    col_ok = cols < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        in_k = depth < K - k
        a = tl.load(a_tile, mask=in_k[None, :], other=0.0)
        b = tl.load(b_tile, mask=in_k[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K
        b_tile += BLOCK_K * N
    c_tile = c_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :]
    tl.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def gemm_bf16_reference(a_ptr, b_ptr, c_ptr, M, N, K,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr):
    SLICE: tl.constexpr = 32
    tiles_n = tl.cdiv(N, BLOCK_N)
    tile_m = tl.program_id(0) // tiles_n
    tile_n = tl.program_id(0) % tiles_n
    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, SLICE):
        depth = k + tl.arange(0, SLICE)
        a = tl.load(a_ptr + rows[:, None] * K + depth[None, :],
                    mask=(rows[:, None] < M) & (depth[None, :] < K), other=0.0).to(tl.float32)
        b = tl.load(b_ptr + depth[:, None] * N + cols[None, :],
                    mask=(depth[:, None] < K) & (cols[None, :] < N), other=0.0).to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
