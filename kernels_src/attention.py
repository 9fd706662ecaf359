"""Flash attention forward in flash-attn's layout: q (batch, seqlen_q, heads, D), k/v (batch, seqlen_k, heads_k,
D), GQA by heads // heads_k query heads per key head; causal aligned bottom-right (query i sees keys
j <= i + seqlen_k - seqlen_q); rows that see no key write 0.

Each program owns BLOCK_M queries of one head and streams key blocks with an online softmax in base 2
(softmax_scale * log2(e) is folded into one multiply). Key blocks fully inside the visible range run
without masks; only the boundary blocks (the causal diagonal, the sequence end) pay for masking.
"""

import triton
import triton.language as tl

from aot.spec import Config, Kernel, Target, f32, i32, i64, ptr


@triton.jit
def _attend_block(
    acc,
    m_i,
    l_i,
    q,
    K,
    V,
    stride_ks,
    stride_vs,
    start_n,
    seqlen_k,
    rows,
    shift,
    scale_log2e,
    MASKED: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    cols = start_n + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    k_ptrs = K + start_n.to(tl.int64) * stride_ks + tl.arange(0, BLOCK_N)[:, None] * stride_ks + dims[None, :]
    v_ptrs = V + start_n.to(tl.int64) * stride_vs + tl.arange(0, BLOCK_N)[:, None] * stride_vs + dims[None, :]
    if MASKED:
        k = tl.load(k_ptrs, mask=cols[:, None] < seqlen_k, other=0.0)
    else:
        k = tl.load(k_ptrs)
    s = tl.dot(q, tl.trans(k)) * scale_log2e
    if MASKED:
        visible = cols[None, :] < seqlen_k
        if IS_CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None] + shift)
        s = tl.where(visible, s, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # rows that have seen no key yet
    p = tl.math.exp2(s - m_safe[:, None])
    alpha = tl.math.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if MASKED:
        v = tl.load(v_ptrs, mask=cols[:, None] < seqlen_k, other=0.0)
    else:
        v = tl.load(v_ptrs)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def flash_attn_fwd(
    Q,
    K,
    V,
    Out,
    stride_qb,
    stride_qh,
    stride_qs,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_ob,
    stride_oh,
    stride_os,
    seqlen_q,
    seqlen_k,
    group,
    scale_log2e,
    HEAD_DIM: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M
    head = tl.program_id(1)
    batch = tl.program_id(2).to(tl.int64)
    head_k = head // group
    Q += batch * stride_qb + head.to(tl.int64) * stride_qh + start_m.to(tl.int64) * stride_qs
    Out += batch * stride_ob + head.to(tl.int64) * stride_oh + start_m.to(tl.int64) * stride_os
    K += batch * stride_kb + head_k.to(tl.int64) * stride_kh
    V += batch * stride_vb + head_k.to(tl.int64) * stride_vh

    rows = start_m + tl.arange(0, BLOCK_M)
    offs_m = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows[:, None] < seqlen_q
    q = tl.load(Q + offs_m[:, None] * stride_qs + dims[None, :], mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    shift = seqlen_k - seqlen_q  # bottom-right alignment
    end = seqlen_k
    full_end = (seqlen_k // BLOCK_N) * BLOCK_N
    if IS_CAUSAL:
        end = tl.minimum(seqlen_k, start_m + BLOCK_M + shift)  # past the last row's last visible key
        first_row_limit = start_m + shift + 1  # keys below this are visible to every row of the block
        full_end = tl.minimum(full_end, tl.maximum(first_row_limit, 0) // BLOCK_N * BLOCK_N)
    full_end = tl.maximum(tl.minimum(full_end, end), 0)
    for start_n in range(0, full_end, BLOCK_N):
        acc, m_i, l_i = _attend_block(
            acc,
            m_i,
            l_i,
            q,
            K,
            V,
            stride_ks,
            stride_vs,
            start_n,
            seqlen_k,
            rows,
            shift,
            scale_log2e,
            False,
            IS_CAUSAL,
            BLOCK_N,
            HEAD_DIM,
        )
    for start_n in range(full_end, end, BLOCK_N):
        acc, m_i, l_i = _attend_block(
            acc,
            m_i,
            l_i,
            q,
            K,
            V,
            stride_ks,
            stride_vs,
            start_n,
            seqlen_k,
            rows,
            shift,
            scale_log2e,
            True,
            IS_CAUSAL,
            BLOCK_N,
            HEAD_DIM,
        )

    out = tl.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0)
    tl.store(Out + offs_m[:, None] * stride_os + dims[None, :], out.to(Out.dtype.element_ty), mask=row_ok)


def configs(target: Target, keys) -> list[Config]:
    if target.arch in (90, 100):  # 227 KB of shared memory
        block_n = 128 if keys["HEAD_DIM"] <= 64 else 64
        return [Config({"BLOCK_M": 128, "BLOCK_N": block_n}, num_warps=8, num_stages=3)]
    # sm_80 serves every 8.x GPU, sm_120 is consumer Blackwell: at most 96 KB fits their 99 KB
    warps = 4 if keys["HEAD_DIM"] <= 64 else 8
    return [Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=warps, num_stages=3)]


KERNELS = [
    Kernel(
        fn=flash_attn_fwd,
        op="flash_attn",
        args=[
            ptr("Q", "T"),
            ptr("K", "T"),
            ptr("V", "T"),
            ptr("Out", "T"),
            i64("stride_qb", aligned=True),
            i64("stride_qh", aligned=True),
            i32("stride_qs", aligned=True),
            i64("stride_kb", aligned=True),
            i64("stride_kh", aligned=True),
            i32("stride_ks", aligned=True),
            i64("stride_vb", aligned=True),
            i64("stride_vh", aligned=True),
            i32("stride_vs", aligned=True),
            i64("stride_ob", aligned=True),
            i64("stride_oh", aligned=True),
            i32("stride_os", aligned=True),
            i32("seqlen_q"),
            i32("seqlen_k"),
            i32("group"),
            f32("scale_log2e"),
        ],
        keys={"T": ["fp16", "bf16"], "HEAD_DIM": [64, 128], "IS_CAUSAL": [False, True]},
        grid_args=[i32("heads"), i32("batch")],
        grid=["cdiv(seqlen_q, BLOCK_M)", "heads", "batch"],
        configs=configs,
    ),
]
