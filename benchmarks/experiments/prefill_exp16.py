"""Hopper prefill with the softmax's exponentials taken two at a time in half precision (ex2.approx.f16x2, one
special-function instruction per two scores) against float32 exp2 (one per score, as shipped), through Triton's JIT:
a minimal dense kernel (TMA loads, the shipped tile per head dim), TFLOP/s, bf16 and fp16 inputs; each result's
largest error against SDPA on a slice in brackets.

    python3 benchmarks/experiments/prefill_exp16.py

The exponent's argument (at most 0) is rounded to float16 before the exponential: about 2^-11 relative, so an
absolute error under 0.004 for arguments down to -8, whose exponentials are then off by under 0.3%.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench  # noqa: E402

triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))
TILES = {64: (128, 64, 8, 3), 128: (128, 128, 8, 3)}


@triton.jit
def _exp2(x, HALF: tl.constexpr):
    if HALF:
        return tl.inline_asm_elementwise(
            "ex2.approx.f16x2 $0, $1;", "=r,r", [x.to(tl.float16)], dtype=tl.float16, is_pure=True, pack=2
        )
    else:
        return tl.math.exp2(x)


@triton.jit
def _softmax_pv(acc, m_i, l_i, s, v, qk_scale, cols, rows, MASK: tl.constexpr, HALF: tl.constexpr):
    if MASK:
        s = tl.where(cols[None, :] <= rows[:, None], s, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
    p = _exp2(s * qk_scale - m_new[:, None], HALF)
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p.to(tl.float32), axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def fwd(Q, K, V, Out, S, H, qk_scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr,
        HALF: tl.constexpr):  # fmt: skip
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
    full = S
    end = S
    if CAUSAL:
        full = start_m
        end = start_m + BM
    for n in tl.range(0, full, BN):
        s = tl.dot(q, tl.trans(dk.load([row0 + n, h * D])))
        v = dv.load([row0 + n, h * D])
        acc, m_i, l_i = _softmax_pv(acc, m_i, l_i, s, v, qk_scale, rows, rows, False, HALF)
    for n in tl.range(full, end, BN):
        s = tl.dot(q, tl.trans(dk.load([row0 + n, h * D])))
        v = dv.load([row0 + n, h * D])
        acc, m_i, l_i = _softmax_pv(acc, m_i, l_i, s, v, qk_scale, n + tl.arange(0, BN), rows, True, HALF)
    dims = tl.arange(0, D)
    out = (acc / l_i[:, None]).to(Out.dtype.element_ty)
    tl.store(Out + (row0 + rows).to(tl.int64)[:, None] * (H * D) + h * D + dims[None, :], out)


def main() -> None:
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        for dim in (64, 128):
            heads = 2048 // dim
            bm, bn, warps, stages = TILES[dim]
            for seqlen in (4096, 8192, 16384):
                batch = 16384 // seqlen
                q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=dtype) for _ in range(3))
                o = torch.empty_like(q)
                for causal in (False, True):
                    flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
                    ref = torch.nn.functional.scaled_dot_product_attention(
                        *(t[:1, :, :2].transpose(1, 2) for t in (q, k, v)), is_causal=causal
                    ).transpose(1, 2)
                    parts = []
                    for _ in range(2):  # alternating rounds
                        for half in (False, True):
                            grid = (seqlen // bm, heads, batch)
                            scale = dim**-0.5 * 1.4426950408889634
                            options = {"D": dim, "BM": bm, "BN": bn, "CAUSAL": causal, "HALF": half,
                                       "num_warps": warps, "num_stages": stages}  # fmt: skip
                            o.fill_(float("nan"))
                            fwd[grid](q, k, v, o, seqlen, heads, scale, **options)
                            err = (o[:1, :, :2].float() - ref.float()).abs().max().item()
                            ms = bench(lambda: fwd[grid](q, k, v, o, seqlen, heads, scale, **options), reps=20)
                            parts.append(f"{'f16x2' if half else 'f32'} {flops / ms / 1e9:.0f} ({err:.0e})")
                    name = str(dtype).removeprefix("torch.")
                    print(f"{name} D{dim} S{seqlen} causal={causal}: " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
