"""Scans along one dim: cumsum (optionally reversed, optionally restarting at varlen sequence boundaries) and
logcumsumexp. x is contiguous and read as (segments, n, inner): program (s, i) scans segment s along n for the lanes
[i * BLOCK_I, (i + 1) * BLOCK_I) of inner, block by block with a running carry. With cu_seqlens (varlen), the scan
dim is dim 0 and segment s covers positions cu[s] to cu[s + 1]; one extra segment scans the tokens after the last
sequence. A reversed scan reads each block backwards and scans it forwards. Sums accumulate in float32 (floats) or
int64 (integers and bool, whose result is int64 as in torch)."""

import triton
import triton.language as tl
from triton.language.extra import libdevice

from aot.spec import Config, Kernel, i32, i64, ptr


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _logaddexp(a, b):
    high = tl.maximum(a, b)
    low = tl.minimum(a, b)
    return tl.where(high == float("-inf"), high, high + libdevice.log1p(tl.exp(low - high)))


@triton.jit
def scan_kernel(
    X, Y, CU, n, inner, batch, varlen, reverse, op,
    BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr,
):  # fmt: skip
    segment = tl.program_id(0)
    lanes = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    first = n * 0
    last = n
    base = segment.to(tl.int64) * n * inner
    if varlen != 0:
        first = tl.load(CU + segment).to(tl.int64)
        last = tl.where(segment == batch, n, tl.load(CU + tl.minimum(segment + 1, batch)).to(tl.int64))
        base = n * 0
    floating: tl.constexpr = X.dtype.element_ty.is_floating()
    if floating:
        carry = tl.zeros((BLOCK_I,), dtype=tl.float32)
        if op == 1:
            carry = carry + float("-inf")
    else:
        carry = tl.zeros((BLOCK_I,), dtype=tl.int64)
    step = tl.arange(0, BLOCK_T)
    for start in range(0, tl.cdiv(last - first, BLOCK_T)):
        k = start * BLOCK_T + step  # the k-th position in scan order
        t = tl.where(reverse != 0, last - 1 - k, first + k)
        mask = (k < last - first)[:, None] & (lanes[None, :] < inner)
        offs = base + t[:, None] * inner + lanes[None, :]
        if floating:
            if op == 1:
                x = tl.load(X + offs, mask=mask, other=float("-inf")).to(tl.float32)
                y = _logaddexp(tl.associative_scan(x, 0, _logaddexp), carry[None, :])
                carry = _logaddexp(carry, tl.reduce(x, 0, _logaddexp))
            else:
                x = tl.load(X + offs, mask=mask, other=0).to(tl.float32)
                y = tl.associative_scan(x, 0, _add) + carry[None, :]
                carry = carry + tl.sum(x, 0)
        else:
            x = tl.load(X + offs, mask=mask, other=0).to(tl.int64)
            y = tl.associative_scan(x, 0, _add) + carry[None, :]
            carry = carry + tl.sum(x, 0)
        tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


def scan_types(values) -> bool:
    """Floats keep their dtype; integers and bool sum into int64."""
    floating = values["T"] in ("fp16", "bf16", "fp32")
    return values["O"] == (values["T"] if floating else "i64")


KERNELS = [
    Kernel(
        fn=scan_kernel,
        op="scan",
        args=[
            ptr("X", "T", aligned=False),
            ptr("Y", "O", aligned=False),
            ptr("CU", "i32", aligned=False),
            i64("n"),
            i64("inner"),
            i32("batch"),
            i32("varlen"),
            i32("reverse"),
            i32("op"),
        ],
        keys={"T": ["fp16", "bf16", "fp32", "i32", "i64", "bool"], "O": ["fp16", "bf16", "fp32", "i64"]},
        combos=scan_types,
        grid_args=[i64("segments")],
        grid=["segments", "cdiv(inner, BLOCK_I)", "1"],
        configs=[
            Config({"BLOCK_T": 1024, "BLOCK_I": 1}, num_warps=4, when="inner == 1"),
            Config({"BLOCK_T": 32, "BLOCK_I": 64}, num_warps=4),
        ],
    ),
]
