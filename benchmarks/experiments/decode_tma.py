"""Decode from a contiguous cache with keys and values loaded through tensor descriptors (TMA), against the shipped
attn_fwd (pointer loads, software-pipelined), both through Triton's JIT: TB/s of KV read by the split-KV partial
pass alone (no combine), in CUDA graphs; GQA 32:8, head dim 128, bf16. Each TMA config's largest error against
SDPA (its partials merged in torch) in brackets.

    python3 benchmarks/experiments/decode_tma.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import graph_ms  # noqa: E402
from run import warm_up_gpu  # noqa: E402
from tune_attention import launch  # noqa: E402

triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))
DIM, HEADS, HEADS_K = 128, 32, 8


@triton.jit
def _fold(acc, m_i, l_i, q, k, v, qk_scale):
    s = tl.dot(q, tl.trans(k))
    m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def decode_tma(Q, K, V, Out, Part, Lse, Lengths, rows_k, capacity, heads, heads_k, num_splits, qk_scale,
               D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):  # fmt: skip
    head_k = tl.program_id(1) // num_splits
    split = tl.program_id(1) % num_splits
    b = tl.program_id(2)
    group = heads // heads_k
    k_len = tl.load(Lengths + b)
    rows = tl.arange(0, BM)
    row_ok = rows < group
    head = head_k * group + rows
    dims = tl.arange(0, D)
    q_rows = (b * heads + head).to(tl.int64) * D
    q = tl.load(Q + q_rows[:, None] + dims[None, :], mask=row_ok[:, None], other=0.0)
    dk = tl.make_tensor_descriptor(K, [rows_k, heads_k * D], [heads_k * D, 1], [BN, D])
    dv = tl.make_tensor_descriptor(V, [rows_k, heads_k * D], [heads_k * D, 1], [BN, D])
    base = b * capacity
    per = tl.cdiv(tl.cdiv(k_len, BN), num_splits)
    lo = split * per * BN
    hi = tl.minimum(lo + per * BN, k_len)
    full_hi = tl.maximum(lo + (hi - lo) // BN * BN, lo)
    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for n in range(lo, full_hi, BN):
        k = dk.load([base + n, head_k * D])
        v = dv.load([base + n, head_k * D])
        acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, qk_scale)
    if full_hi < hi:  # the slice's last, partial block: keys past the sequence are masked, their values zeroed
        cols = full_hi + tl.arange(0, BN)
        k = dk.load([base + full_hi, head_k * D])
        v = dv.load([base + full_hi, head_k * D])
        v = tl.where(cols[:, None] < hi, v, 0.0)
        s = tl.dot(q, tl.trans(k))
        s = tl.where(cols[None, :] < hi, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        p = tl.math.exp2(s * qk_scale - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    seen = l_i > 0
    out = tl.where(seen[:, None], acc / tl.where(seen, l_i, 1.0)[:, None], 0.0)
    if num_splits > 1:
        part_rows = split.to(tl.int64) * (rows_k // capacity * heads) + b * heads + head
        tl.store(Part + part_rows[:, None] * D + dims[None, :], out, mask=row_ok[:, None])
        lse = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), -float("inf"))
        tl.store(Lse + part_rows, lse, mask=row_ok)
    else:
        tl.store(Out + q_rows[:, None] + dims[None, :], out.to(Out.dtype.element_ty), mask=row_ok[:, None])


def main() -> None:
    warm_up_gpu(1.0)
    tma_configs = [(16, bn, w, s) for bn in (64, 128) for w in (4, 8) for s in (2, 3, 4)]
    shipped_configs = [(16, 32, 2, 3), (16, 64, 4, 3), (16, 128, 4, 2)]  # the table's and two earlier runners-up
    shapes = [(64, 8192, (1,)), (16, 4096, (1, 2)), (4, 8192, (4, 8)), (1, 32768, (16, 24, 33))]
    cases = []
    for batch, context, split_counts in shapes:
        q = torch.randn(batch, 1, HEADS, DIM, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(batch, context, HEADS_K, DIM, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lengths = torch.full((batch,), context, dtype=torch.int32, device="cuda")
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True
        ).transpose(1, 2)
        for splits in split_counts:
            part = torch.empty(splits, batch * HEADS, DIM, device="cuda")
            lse = torch.empty(splits, batch * HEADS, device="cuda")
            cases.append((f"b{batch}x{context}/s{splits}", q, k, v, lengths, splits, part, lse, ref))
    print("config", *[c[0] for c in cases], sep="\t")
    scale = DIM**-0.5 * 1.4426950408889634
    for config in tma_configs:
        bm, bn, warps, stages = config
        row = []
        for _, q, k, v, lengths, splits, part, lse, ref in cases:
            out = torch.full_like(q, float("nan"))
            batch, context = k.shape[:2]

            def call():
                grid = (1, HEADS_K * splits, batch)
                decode_tma[grid](q, k, v, out, part, lse, lengths, batch * context, context, HEADS, HEADS_K, splits,
                                 scale, D=DIM, BM=bm, BN=bn, num_warps=warps, num_stages=stages)  # fmt: skip

            try:
                call()
                if splits > 1:  # merge the partials (lse in base 2) to check them
                    w = torch.softmax(lse * 0.6931471805599453, dim=0)
                    out = (w[..., None] * part).sum(0).view_as(q).to(q.dtype)
                err = (out.float() - ref.float()).abs().max().item()
                ms = graph_ms(call)
                row.append(f"{k.numel() * 4 / ms / 1e9:.2f} ({err:.0e})")
            except Exception as e:  # a config that does not fit (shared memory)
                row.append(type(e).__name__[:8])
        print("tma " + "/".join(map(str, config)), *row, sep="\t", flush=True)
    for config in shipped_configs:
        row = []
        for _, q, k, v, _lengths, splits, part, lse, _ in cases:
            out = torch.empty_like(q)
            ms = graph_ms(lambda: launch(q, k, v, out, HEADS // HEADS_K, splits, DIM, False, config, part, lse))
            row.append(f"{k.numel() * 4 / ms / 1e9:.2f}")
        print("shipped " + "/".join(map(str, config)), *row, sep="\t", flush=True)


if __name__ == "__main__":
    main()
