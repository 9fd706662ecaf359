"""rotary_qk (GPT-NeoX halves, in place, a position per token) as the wheel runs it against a one-tile form through
Triton's JIT: the tile's rows are q's heads then k's (a pointer chosen per row), so both tensors' loads are issued
before any store, where the kernel of 39e02a2 rotated q's heads and then k's. TB/s (q and k read and written once;
bursts of ten calls queued behind a sleeping kernel), bf16; each JIT tile's largest error against torch in brackets
(one rotation of the original q and k; the run of 2026-11-24 checked the timed, already rotated tensors instead).

    python3 benchmarks/experiments/rotary_qk_tiles.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from rotary import rotary_qk_eager  # noqa: E402
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


@triton.jit
def rotary_qk_one_tile(Q, K, CACHE, POSITIONS, heads, heads_k, half, n_pos, stride_qt, stride_qh, stride_kt,
                       stride_kh, stride_cs, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):  # fmt: skip
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    j = tl.arange(0, BLOCK_HALF)[None, :]
    rows = tl.where(h < heads, Q + t * stride_qt + h * stride_qh, K + t * stride_kt + (h - heads) * stride_kh)
    mask = (h < heads + heads_k) & (j < half)
    a = tl.load(rows + j, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(rows + j + half, mask=mask, other=0.0).to(tl.float32)
    pos = tl.load(POSITIONS + t)
    inside = (pos >= 0) & (pos < n_pos)
    table = CACHE + tl.where(inside, pos, 0) * stride_cs + j
    c = tl.load(table, mask=(j < half) & inside, other=1.0).to(tl.float32)
    s = tl.load(table + half, mask=(j < half) & inside, other=0.0).to(tl.float32)
    tl.store(rows + j, (a * c - b * s).to(Q.dtype.element_ty), mask=mask)
    tl.store(rows + j + half, (a * s + b * c).to(Q.dtype.element_ty), mask=mask)


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    for tokens, heads, heads_k, dim in ((4096, 32, 8, 128), (16384, 32, 8, 128), (4096, 64, 8, 64), (16384, 64, 8, 64)):
        q = torch.randn(tokens, heads, dim, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(tokens, heads_k, dim, device="cuda", dtype=torch.bfloat16)
        q0, k0 = q.clone(), k.clone()  # the timed calls rotate q and k in place; checks start from these
        positions = torch.randperm(tokens, device="cuda")
        angles = torch.rand(tokens, dim // 2, device="cuda")
        cache = torch.cat([angles.cos(), angles.sin()], -1).bfloat16()
        nbytes = 2 * (q.numel() + k.numel()) * 2
        wheel = bench_queued(lambda: xopsaot.rotary_qk(positions, q, k, cache, validate=False))
        parts = [f"wheel {nbytes / wheel / 1e9:.2f}"]
        half = dim // 2
        for block_h, warps in ((64, 4), (64, 8), (32, 4), (16, 4), (16, 2), (8, 2)):
            grid = (tokens, triton.cdiv(heads + heads_k, block_h))

            def call(q=q, k=k):
                rotary_qk_one_tile[grid](q, k, cache, positions, heads, heads_k, half, tokens, q.stride(0),
                                         q.stride(1), k.stride(0), k.stride(1), cache.stride(0), BLOCK_H=block_h,
                                         BLOCK_HALF=half, num_warps=warps)  # fmt: skip

            q2, k2 = q0.clone(), k0.clone()
            call(q2, k2)
            rq, rk = q0.clone(), k0.clone()
            rotary_qk_eager(positions, rq, rk, cache)
            err = max((q2.float() - rq.float()).abs().max().item(), (k2.float() - rk.float()).abs().max().item())
            ms = bench_queued(call)
            parts.append(f"{block_h}/{warps} {nbytes / ms / 1e9:.2f} ({err:.0e})")
        again = bench_queued(lambda: xopsaot.rotary_qk(positions, q, k, cache, validate=False))
        parts.append(f"wheel again {nbytes / again / 1e9:.2f}")
        print(f"{tokens} x ({heads} + {heads_k}) x {dim}: " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
