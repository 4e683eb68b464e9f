"""Causal attention forward, O = softmax(scale * Q K^T + causal mask) V, bf16 in and out, for kforge's Triton
suite. Q, K, V and O are [batch * heads, seq, HEAD_DIM] contiguous (batch and heads flattened).

attention_kernel: flash-attention style. A program owns BLOCK_M query rows of one (batch, head) and walks the
keys in BLOCK_N blocks with an online softmax in f32 (base-2 exponentials, the scale folded into log2(e)),
the probabilities cast to bf16 for the P V product. Key blocks entirely below the diagonal run without
masks; the blocks that cross the diagonal (or the end of the sequence) run masked. Keys beyond the
diagonal are never visited.

attention_reference: the same signature, launched with the default configuration's grid; it takes its
BLOCK_M rows 16 at a time, finds their maxima in one pass over all visible keys, then sums the
exponentials and the weighted values in a second pass, every product in IEEE f32 from f32 copies of the
operands, with fixed 32-key blocks and every load masked (BLOCK_M must be a multiple of 16).
"""
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    first_row = tl.program_id(0) * BLOCK_M
    head_start = tl.program_id(1).to(tl.int64) * seq * HEAD_DIM
    rows = first_row + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + head_start + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < seq, other=0.0)
    k_base = k_ptr + head_start
    v_base = v_ptr + head_start
    qk_scale = scale * 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    # Key blocks every row of this program sees whole: keys < first_row + 1, in whole blocks.
    unmasked_end = ((first_row + 1) // BLOCK_N) * BLOCK_N
    for start in range(0, unmasked_end, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_base + keys[:, None] * HEAD_DIM + dims[None, :])
        v = tl.load(v_base + keys[:, None] * HEAD_DIM + dims[None, :])
        scores = tl.dot(q, tl.trans(k)) * qk_scale
        new_max = tl.maximum(row_max, tl.max(scores, axis=1))
        p = tl.exp2(scores - new_max[:, None])
        correction = tl.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(p, axis=1)
        acc = acc * correction[:, None] + tl.dot(p.to(tl.bfloat16), v)
        row_max = new_max

    # Blocks crossing the diagonal or the end of the sequence.
    masked_end = tl.minimum(first_row + BLOCK_M, seq)
    for start in range(unmasked_end, masked_end, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        key_ok = keys < seq
        k = tl.load(k_base + keys[:, None] * HEAD_DIM + dims[None, :], mask=key_ok[:, None], other=0.0)
        v = tl.load(v_base + keys[:, None] * HEAD_DIM + dims[None, :], mask=key_ok[:, None], other=0.0)
        visible = (keys[None, :] <= rows[:, None]) & key_ok[None, :]
        scores = tl.where(visible, tl.dot(q, tl.trans(k)) * qk_scale, -float("inf"))
        new_max = tl.maximum(row_max, tl.max(scores, axis=1))
        p = tl.exp2(scores - new_max[:, None])
        correction = tl.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(p, axis=1)
        acc = acc * correction[:, None] + tl.dot(p.to(tl.bfloat16), v)
        row_max = new_max

    out = acc / row_sum[:, None]
    tl.store(o_ptr + head_start + rows[:, None] * HEAD_DIM + dims[None, :], out.to(tl.bfloat16),
             mask=rows[:, None] < seq)


@triton.jit
def attention_reference(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    ROWS: tl.constexpr = 16
    KEYS: tl.constexpr = 32
    head_start = tl.program_id(1).to(tl.int64) * seq * HEAD_DIM
    dims = tl.arange(0, HEAD_DIM)
    for part in range(BLOCK_M // ROWS):
        rows = tl.program_id(0) * BLOCK_M + part * ROWS + tl.arange(0, ROWS)
        q = tl.load(q_ptr + head_start + rows[:, None] * HEAD_DIM + dims[None, :],
                    mask=rows[:, None] < seq, other=0.0).to(tl.float32)
        last_key = tl.minimum(tl.program_id(0) * BLOCK_M + (part + 1) * ROWS, seq)

        row_max = tl.full([ROWS], -float("inf"), tl.float32)
        for start in range(0, last_key, KEYS):
            keys = start + tl.arange(0, KEYS)
            k = tl.load(k_ptr + head_start + keys[:, None] * HEAD_DIM + dims[None, :],
                        mask=keys[:, None] < seq, other=0.0).to(tl.float32)
            scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
            visible = (keys[None, :] <= rows[:, None]) & (keys[None, :] < seq)
            row_max = tl.maximum(row_max, tl.max(tl.where(visible, scores, -float("inf")), axis=1))

        row_sum = tl.zeros([ROWS], tl.float32)
        acc = tl.zeros([ROWS, HEAD_DIM], tl.float32)
        for start in range(0, last_key, KEYS):
            keys = start + tl.arange(0, KEYS)
            k = tl.load(k_ptr + head_start + keys[:, None] * HEAD_DIM + dims[None, :],
                        mask=keys[:, None] < seq, other=0.0).to(tl.float32)
            v = tl.load(v_ptr + head_start + keys[:, None] * HEAD_DIM + dims[None, :],
                        mask=keys[:, None] < seq, other=0.0).to(tl.float32)
            scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
            visible = (keys[None, :] <= rows[:, None]) & (keys[None, :] < seq)
            p = tl.where(visible, tl.exp(scores - row_max[:, None]), 0.0)
            row_sum += tl.sum(p, axis=1)
            acc += tl.dot(p, v, input_precision="ieee")
        out = acc / row_sum[:, None]
        tl.store(o_ptr + head_start + rows[:, None] * HEAD_DIM + dims[None, :], out.to(tl.bfloat16),
                 mask=rows[:, None] < seq)
