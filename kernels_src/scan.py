"""Scans along one dim: cumsum (optionally reversed, optionally restarting at varlen sequence boundaries) and
logcumsumexp. x is contiguous and read as (segments, n, inner): program (s, i) scans segment s along n for the lanes
[i * BLOCK_I, (i + 1) * BLOCK_I) of inner, block by block with a running carry. With cu_seqlens (varlen), the scan
dim is dim 0 and segment s covers positions cu[s] to cu[s + 1]; one extra segment scans the tokens after the last
sequence. A reversed scan reads each block backwards and scans it forwards. Sums accumulate in float32 (floats) or
int64 (integers and bool, whose result is int64 as in torch).

inner == 1 (a scan along the last dim) takes 1-D blocks: a [BLOCK_T, 1] tile ran at 40-45% of copy. logcumsumexp
scans (max, sum of 2 ** (x - max)) pairs in base 2, one exp2 per combine and a log2 per element, where a logaddexp
combine took an exp and a log1p (6% of copy; benchmarks/experiments/scan_rows.py)."""

import triton
import triton.language as tl

from aot.spec import Config, Kernel, i32, i64, ptr
from kernels_src._pdl import wait_for_predecessor

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _pair_combine(m1, s1, m2, s2):
    """(max, sum of 2 ** (x - max)) of the union of two runs; a run of -inf is (-inf, anything) and adds nothing."""
    m = tl.maximum(m1, m2)
    e = tl.where(m == -float("inf"), 0.0, tl.exp2(tl.minimum(m1, m2) - m))
    return m, tl.where(m1 >= m2, s1 + s2 * e, s2 + s1 * e)


@triton.jit
def _last(v, is_last):
    """The scan's last position along axis 0 (the block's total), kept as a broadcastable row: a sum of zeros and
    that one value, exact for -inf too."""
    return tl.sum(tl.where(is_last, v, 0), axis=0, keep_dims=True)


@triton.jit
def _scan_block(X, Y, offs, mask, carry, carry_m, carry_s, is_last, op, FLOATING: tl.constexpr):
    """Scan one block along axis 0 after the carries (rows that broadcast against it), store it, return the carries
    past it."""
    if FLOATING:
        if op == 1:
            x = tl.load(X + offs, mask=mask, other=float("-inf")).to(tl.float32) * LOG2E
            m, s = tl.associative_scan((x, tl.full(x.shape, 1.0, tl.float32)), 0, _pair_combine)
            m, s = _pair_combine(carry_m, carry_s, m, s)
            y = (m + tl.log2(s)) * LN2
            carry_m = _last(m, is_last)
            carry_s = _last(s, is_last)
        else:
            x = tl.load(X + offs, mask=mask, other=0).to(tl.float32)
            y = tl.cumsum(x, 0) + carry
            carry = carry + tl.sum(x, 0, keep_dims=True)
    else:
        x = tl.load(X + offs, mask=mask, other=0).to(tl.int64)
        y = tl.associative_scan(x, 0, _add) + carry
        carry = carry + tl.sum(x, 0, keep_dims=True)
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)
    return carry, carry_m, carry_s


@triton.jit
def _scan_row(X, Y, first, last, reverse, op, BLOCK_T: tl.constexpr, FORWARD: tl.constexpr,
              FLOATING: tl.constexpr):  # fmt: skip
    """One line along the last dim in 1-D blocks. FORWARD: first is 0 and no reversal, so the offsets are known
    contiguous (and, in the hinted variant, aligned) and the accesses vectorize."""
    step = tl.arange(0, BLOCK_T)
    carry_m = tl.full([1], -float("inf"), tl.float32)  # logcumsumexp's running (max, sum) pair in base 2
    carry_s = tl.zeros([1], dtype=tl.float32)
    carry = tl.zeros([1], dtype=tl.float32 if FLOATING else tl.int64)
    for start in range(0, tl.cdiv(last - first, BLOCK_T)):
        k = start * BLOCK_T + step  # the k-th position in scan order
        if FORWARD:
            offs = k
        else:
            offs = tl.where(reverse != 0, last - 1 - k, first + k)
        carry, carry_m, carry_s = _scan_block(X, Y, offs, k < last - first, carry, carry_m, carry_s,
                                              step == BLOCK_T - 1, op, FLOATING)  # fmt: skip


@triton.jit
def scan_kernel(
    X, Y, CU, n, inner, batch, varlen, reverse, op,
    BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    wait_for_predecessor(PDL)
    segment = tl.program_id(0)
    floating: tl.constexpr = X.dtype.element_ty.is_floating()
    if BLOCK_I == 1 and varlen == 0 and reverse == 0:  # the common row: its own code, whose accesses vectorize
        row = segment.to(tl.int64) * n
        _scan_row(X + row, Y + row, 0, n, 0, op, BLOCK_T, True, floating)
    else:
        first = n * 0
        last = n
        base = segment.to(tl.int64) * n * inner
        if varlen != 0:
            first = tl.load(CU + segment).to(tl.int64)
            last = tl.where(segment == batch, n, tl.load(CU + tl.minimum(segment + 1, batch)).to(tl.int64))
            base = n * 0
        if BLOCK_I == 1:
            _scan_row(X + base, Y + base, first, last, reverse, op, BLOCK_T, False, floating)
        else:
            lanes = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
            step = tl.arange(0, BLOCK_T)
            is_last = (step == BLOCK_T - 1)[:, None]
            carry_m = tl.full([1, BLOCK_I], -float("inf"), tl.float32)
            carry_s = tl.zeros([1, BLOCK_I], dtype=tl.float32)
            carry = tl.zeros([1, BLOCK_I], dtype=tl.float32 if floating else tl.int64)
            for start in range(0, tl.cdiv(last - first, BLOCK_T)):
                k = start * BLOCK_T + step
                t = tl.where(reverse != 0, last - 1 - k, first + k)
                mask = (k < last - first)[:, None] & (lanes[None, :] < inner)
                offs = base + t[:, None] * inner + lanes[None, :]
                carry, carry_m, carry_s = _scan_block(X, Y, offs, mask, carry, carry_m, carry_s, is_last, op,
                                                      floating)  # fmt: skip


def scan_types(values) -> bool:
    """Floats keep their dtype; integers and bool sum into int64."""
    floating = values["T"] in ("fp16", "bf16", "fp32")
    return values["O"] == (values["T"] if floating else "i64")


KERNELS = [
    Kernel(
        fn=scan_kernel,
        op="scan",
        args=[
            ptr("X", "T"),
            ptr("Y", "O"),
            ptr("CU", "i32", aligned=False),
            i64("n", aligned=True),
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
            Config({"BLOCK_T": 2048, "BLOCK_I": 1}, num_warps=4, when="inner == 1"),
            Config({"BLOCK_T": 32, "BLOCK_I": 64}, num_warps=4),
        ],
    ),
]
