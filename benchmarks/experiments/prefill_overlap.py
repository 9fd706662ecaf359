"""Hopper prefill with the next key block's QK^T issued before this block's softmax (FA3's intra-warpgroup
overlap, written as a software-pipelined loop: "+ov") against the shipped loop order, through Triton's JIT: TFLOP/s,
bf16, TMA loads, the scaled exp2 softmax of attn_fwd_tma; batch x seqlen = 16k tokens; each result's largest
error against SDPA on a slice in parentheses.

    python3 benchmarks/experiments/prefill_overlap.py [--dims 64] [--configs 128,64,4,3;64,64,4,3] [--no-overlap]

--configs sweeps BLOCK_M, BLOCK_N, warps and stages (the default: the four measured first); --no-overlap times the
shipped loop order only.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench  # noqa: E402

triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))


@triton.jit
def _softmax_pv(acc, m_i, l_i, s, v, qk_scale, cols, rows, MASK: tl.constexpr):
    if MASK:
        s = tl.where(cols[None, :] <= rows[:, None], s, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def fwd(Q, K, V, Out, S, H, qk_scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr,
        OVERLAP: tl.constexpr):  # fmt: skip
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BM
    h = tl.program_id(1)
    row0 = tl.program_id(2) * S
    rows = start_m + tl.arange(0, BM)
    shape = [S * tl.num_programs(2), H * D]
    dq = tl.make_tensor_descriptor(Q, shape=shape, strides=[H * D, 1], block_shape=[BM, D])
    dk = tl.make_tensor_descriptor(K, shape=shape, strides=[H * D, 1], block_shape=[BN, D])
    dv = tl.make_tensor_descriptor(V, shape=shape, strides=[H * D, 1], block_shape=[BN, D])
    q = dq.load([row0 + start_m, h * D])
    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    full = S  # key blocks every row sees, then the causal diagonal block
    end = S
    if CAUSAL:
        full = start_m
        end = start_m + BM
    if OVERLAP:
        if full > 0:
            s = tl.dot(q, tl.trans(dk.load([row0, h * D])))
            for n in tl.range(BN, full, BN):
                s_next = tl.dot(q, tl.trans(dk.load([row0 + n, h * D])))
                v = dv.load([row0 + n - BN, h * D])
                acc, m_i, l_i = _softmax_pv(acc, m_i, l_i, s, v, qk_scale, rows, rows, False)
                s = s_next
            v = dv.load([row0 + full - BN, h * D])
            acc, m_i, l_i = _softmax_pv(acc, m_i, l_i, s, v, qk_scale, rows, rows, False)
    else:
        for n in tl.range(0, full, BN):
            s = tl.dot(q, tl.trans(dk.load([row0 + n, h * D])))
            v = dv.load([row0 + n, h * D])
            acc, m_i, l_i = _softmax_pv(acc, m_i, l_i, s, v, qk_scale, rows, rows, False)
    for n in tl.range(full, end, BN):
        s = tl.dot(q, tl.trans(dk.load([row0 + n, h * D])))
        v = dv.load([row0 + n, h * D])
        acc, m_i, l_i = _softmax_pv(acc, m_i, l_i, s, v, qk_scale, n + tl.arange(0, BN), rows, True)
    dims = tl.arange(0, D)
    out = (acc / l_i[:, None]).to(Out.dtype.element_ty)
    tl.store(Out + (row0 + rows).to(tl.int64)[:, None] * (H * D) + h * D + dims[None, :], out)


def option(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> None:
    torch.manual_seed(0)
    text = option("--configs", "128,128,8,3;128,64,8,3;128,128,8,2;128,64,8,4")
    configs = [tuple(int(x) for x in c.split(",")) for c in text.split(";")]
    dims = [int(d) for d in option("--dims", "128,64").split(",")]
    overlaps = (False,) if "--no-overlap" in sys.argv else (False, True)
    for dim, heads in ((d, 2048 // d) for d in dims):
        for seqlen in (4096, 8192, 16384):
            batch = 16384 // seqlen
            q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o = torch.empty_like(q)
            for causal in (False, True):
                flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
                ref = torch.nn.functional.scaled_dot_product_attention(
                    *(t[:1, :, :2].transpose(1, 2) for t in (q, k, v)), is_causal=causal
                )
                results = []
                for bm, bn, warps, stages in configs:
                    for overlap in overlaps:
                        label = f"{bm}/{bn}/{warps}/{stages}{'+ov' if overlap else ''}"
                        options = {"D": dim, "BM": bm, "BN": bn, "CAUSAL": causal, "OVERLAP": overlap,
                                   "num_warps": warps, "num_stages": stages}  # fmt: skip
                        grid = (seqlen // bm, heads, batch)
                        scale = dim**-0.5 * 1.4426950408889634
                        try:
                            o.fill_(float("nan"))
                            fwd[grid](q, k, v, o, seqlen, heads, scale, **options)
                            err = (o[:1, :, :2].transpose(1, 2).float() - ref.float()).abs().max().item()
                            ms = bench(lambda: fwd[grid](q, k, v, o, seqlen, heads, scale, **options), reps=20)
                            results.append(f"{label}: {flops / ms / 1e9:.0f} (err {err:.0e})")
                        except Exception as e:  # out of shared memory
                            results.append(f"{label}: {type(e).__name__} {str(e)[:60]}")
                print(f"D{dim} S{seqlen} causal={causal}:", " | ".join(results), flush=True)


if __name__ == "__main__":
    main()
