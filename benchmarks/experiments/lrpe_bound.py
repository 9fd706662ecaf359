"""lrpe_cosine (y = [x cos(t theta), x sin(t theta)], t = token + offset) through Triton's JIT as the wheel launches
it, in forms that show what bounds it: the shipped kernel's math (float64 angle reduction, then the hardware's sin
and cos), the angle in float32 (inexact, for timing), no sin and cos (wrong, for timing), and a candidate that
walks TOKENS tokens per program by the angle-addition recurrence (cos and sin of (t + 1) theta from those of
t theta and of theta: four FMAs per element and token instead of the reduction and two special-function calls),
with its error against float64 (in a float32 output). TB/s counting x read and the doubled y written, bf16,
32 heads x 128.

    python3 benchmarks/experiments/lrpe_bound.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


@triton.jit
def _sincos(t, theta, MODE: tl.constexpr):
    if MODE == 1:
        angle = t.to(tl.float32) * theta
        return libdevice.fast_cosf(angle), libdevice.fast_sinf(angle)
    elif MODE == 2:
        angle = t.to(tl.float32) * theta
        return angle, angle
    else:
        angle = t.to(tl.float64) * theta.to(tl.float64)
        turns = tl.floor(angle * 0.15915494309189535 + 0.5)
        reduced = (angle - turns * 6.283185307179586).to(tl.float32)
        return libdevice.fast_cosf(reduced), libdevice.fast_sinf(reduced)


@triton.jit(do_not_specialize=["heads", "offset", "seqlen"])
def lrpe_modes(X, THETA, Y, heads, offset, seqlen, HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr,
               BLOCK_D: tl.constexpr, TOKENS: tl.constexpr, MODE: tl.constexpr):  # fmt: skip
    """x (seqlen, heads, HEAD_DIM) contiguous, theta (heads, HEAD_DIM) float32, y (seqlen, heads, 2 HEAD_DIM)."""
    s0 = tl.program_id(0) * TOKENS
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    for start in range(0, HEAD_DIM, BLOCK_D):
        d = start + tl.arange(0, BLOCK_D)[None, :]
        mask = h < heads
        theta = tl.load(THETA + h * HEAD_DIM + d, mask=mask, other=0.0)
        c, sn = _sincos(s0.to(tl.int64) + offset, theta, MODE)
        if TOKENS > 1:
            c1, s1 = _sincos(tl.zeros([1], tl.int64) + 1, theta, 0)  # cos and sin of theta itself
        for k in range(TOKENS):
            s = s0 + k
            m = mask & (s < seqlen)
            x = tl.load(X + s.to(tl.int64) * heads * HEAD_DIM + h * HEAD_DIM + d, mask=m, other=0.0).to(tl.float32)
            row = Y + s.to(tl.int64) * heads * 2 * HEAD_DIM + h * 2 * HEAD_DIM + d
            tl.store(row, (x * c).to(Y.dtype.element_ty), mask=m)
            tl.store(row + HEAD_DIM, (x * sn).to(Y.dtype.element_ty), mask=m)
            if TOKENS > 1:
                c, sn = c * c1 - sn * s1, sn * c1 + c * s1


def run(x, theta, y, offset, tokens, mode, block_h=16, block_d=64):
    seqlen, heads, dim = x.shape
    grid = (triton.cdiv(seqlen, tokens), triton.cdiv(heads, block_h))
    lrpe_modes[grid](x, theta, y, heads, offset, seqlen, HEAD_DIM=dim, BLOCK_H=block_h, BLOCK_D=block_d,
                     TOKENS=tokens, MODE=mode, num_warps=4)  # fmt: skip


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    for seqlen, offset in ((4096, 0), (16384, 0), (4096, 1_000_000)):
        x = torch.randn(seqlen, 32, 128, device="cuda", dtype=torch.bfloat16)
        theta = torch.rand(32, 128, device="cuda")
        y = torch.empty(seqlen, 32, 256, device="cuda", dtype=torch.bfloat16)
        y32 = torch.empty(seqlen, 32, 256, device="cuda")
        nbytes = 3 * x.numel() * 2
        t = torch.arange(seqlen, device="cuda", dtype=torch.float64)[:, None, None] + offset
        angle = t * theta.double()
        want = torch.cat([x.double() * angle.cos(), x.double() * angle.sin()], -1)
        cells = {"wheel": bench_queued(lambda: xopsaot.lrpe_cosine(x[None], theta, offset=offset))}
        errors = {}
        forms = [(1, 0, "shipped math"), (1, 1, "fp32 angle"), (1, 2, "no sincos")]
        forms += [(n, 0, f"recurrence {n}") for n in (8, 16, 32)]
        for tokens, mode, name in forms:
            y32.fill_(float("nan"))  # the error in a float32 output, where bf16's rounding does not hide it
            run(x, theta, y32, offset, tokens, mode)
            errors[name] = (y32.double() - want).abs().max().item()
            cells[name] = bench_queued(lambda t=tokens, m=mode: run(x, theta, y, offset, t, m))
        print(f"{seqlen} tokens, offset {offset}: " + ", ".join(
            f"{k} {nbytes / v / 1e9:.2f}" + (f" (max error {errors[k]:.1e})" if k in errors else "")
            for k, v in cells.items()), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
