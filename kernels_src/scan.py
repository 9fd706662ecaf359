"""Scans along one dim: cumsum (optionally reversed, optionally restarting at varlen sequence boundaries) and
logcumsumexp. x is contiguous and read as (segments, n, inner): program (s, i, p) scans segment s along n (or its
chunk p, below) for the lanes [i * BLOCK_I, (i + 1) * BLOCK_I) of inner, block by block with a running carry. With
cu_seqlens (varlen), the scan dim is dim 0 and segment s covers positions cu[s] to cu[s + 1]; one extra segment
scans the tokens after the last sequence. A reversed scan reads each block backwards and scans it forwards. Sums
accumulate in float32 (floats) or int64 (integers and bool, whose result is int64 as in torch).

inner == 1 (a scan along the last dim) takes 1-D blocks: a [BLOCK_T, 1] tile ran at 40-45% of copy. logcumsumexp
works in base 2. A block whose terms 2 ** (x - max) are all 0 or at least 2 ** -100 (and that holds no +inf or NaN:
nearly every block) is a plain cumsum of 2 ** (x - ref), ref the running max, then a log2: one exp2 per element.
Other blocks scan (max, sum of 2 ** (x - max)) pairs, one exp2 per combine; a logaddexp combine took an exp and a
log1p (6% of copy; benchmarks/experiments/scan_rows.py). H100, bf16 (wheel A/B, h100-2026-11-24-experiments.md):
the cumsum form took logcumsumexp along the last dim of 16384 x 8192 from 0.99 to 1.77 TB/s, along dim 0 from 0.51
to 0.63.

Lanes (inner > 1): cumsum takes tiles of 8 positions x 512 lanes over 2 warps, so each thread holds all 8
positions of its 8 lanes and the scan along the tile's rows stays in registers; logcumsumexp keeps 32 x 64 tiles
over 4 warps (the wide tile, and a loop over positions carrying each lane's pair, lost to it at 4096 x 4096 and
32 x 1024 x 1024). Their accesses vectorize where the lanes' pitch (inner) is a multiple of 8, hinted through the
argument `pitch`. H100, bf16, wheel A/B (h100-2026-11-26-experiments.md, stop 33): cumsum along dim 0 of 4096 x 4096
0.89 -> 1.38 TB/s, of 16384 x 8192 0.99 -> 1.76; logcumsumexp there 0.56 -> 0.57 and 0.63 -> 0.64, along dim 1 of
32 x 1024 x 1024 1.02 -> 1.11; cumsum there 1.70 -> 1.63 (now chunked: 64 wide programs, 512 narrow ones before).

Few programs (a scan along the first dim of a 2-D tensor is one segment and inner / BLOCK_I lane blocks; a 1-D
tensor is one program) would leave most of the GPU idle while each walks its whole line. The launcher then splits
the scan dim into chunks (program_id(2)): scan_totals_kernel writes each chunk's total (the (max, sum) pair for
logcumsumexp) to a workspace, and scan_kernel starts each chunk from the totals of the chunks before it in scan
order. That reads x twice."""

from dataclasses import replace

import triton
import triton.language as tl

from aot.spec import Config, Kernel, Target, i32, i64, ptr
from kernels_src._pdl import wait_for_predecessor

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _pair_combine(m1, s1, m2, s2):
    """(max, sum of 2 ** (x - max)) of the union of two runs; a run of -inf is (-inf, anything) and adds nothing.
    A NaN max stays NaN (torch's NaN from a NaN on, after a +inf too, whose max would otherwise drop it). Equal
    maxima weigh 1, two runs reaching +inf too (inf - inf would make the sum NaN where torch gives +inf)."""
    m = tl.maximum(m1, m2, propagate_nan=tl.PropagateNan.ALL)
    e = tl.where(m == -float("inf"), 0.0, tl.exp2(tl.where(m1 == m2, 0.0, tl.minimum(m1, m2) - m)))
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
            top = tl.max(x, 0, keep_dims=True)
            low = tl.min(tl.where(x == -float("inf"), top, x), 0, keep_dims=True)  # the least finite value
            # Blocks whose terms 2 ** (x - max) are all 0 or at least 2 ** -100 (x in base 2; no +inf or NaN
            # there) take a plain cumsum of 2 ** (x - ref): one exp2 per element; the pair scan costs one per combine.
            near = (top == -float("inf")) | ((top < float("inf")) & (top - low < 100.0))
            if tl.min(near.to(tl.int32)) != 0:
                ref = tl.maximum(top, carry_m)
                safe = tl.where(ref == -float("inf"), 0.0, ref)
                # a carry that reached +inf keeps its weight (inf - inf would give NaN where torch gives +inf)
                s = tl.cumsum(tl.exp2(x - safe), 0) + carry_s * tl.exp2(tl.where(carry_m == safe, 0.0, carry_m - safe))
                y = (safe + tl.log2(s)) * LN2
                carry_m = ref
                carry_s = _last(s, is_last)
            else:
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
def _scan_row(X, Y, first, last, k0, k_stop, reverse, op, carry, carry_m, carry_s, BLOCK_T: tl.constexpr,
              FORWARD: tl.constexpr, FLOATING: tl.constexpr):  # fmt: skip
    """Positions [k0, min(k_stop, last - first)) in scan order of one line along the last dim, in 1-D blocks, after
    the carries (shape [1]). FORWARD: first is 0 and no reversal, so the offsets are known contiguous (and, in the
    hinted variant, aligned) and the accesses vectorize; the mask compares with the two bounds apart, each a known
    multiple of 16 there (their minimum is not known as one, which cost the vector accesses)."""
    step = tl.arange(0, BLOCK_T)
    for start in range(0, tl.cdiv(tl.minimum(k_stop, last - first) - k0, BLOCK_T)):
        k = k0 + start * BLOCK_T + step  # the k-th position in scan order
        if FORWARD:
            offs = k
        else:
            offs = tl.where(reverse != 0, last - 1 - k, first + k)
        mask = (k < k_stop) & (k < last - first)
        carry, carry_m, carry_s = _scan_block(X, Y, offs, mask, carry, carry_m, carry_s, step == BLOCK_T - 1, op,
                                              FLOATING)  # fmt: skip


@triton.jit
def _segment(CU, segment, n, inner, batch, varlen):
    """The segment's first and last positions along the scan dim and the offset of its first element."""
    first = n * 0
    last = n
    base = segment.to(tl.int64) * n * inner
    if varlen != 0:
        first = tl.load(CU + segment).to(tl.int64)
        last = tl.where(segment == batch, n, tl.load(CU + tl.minimum(segment + 1, batch)).to(tl.int64))
        base = n * 0
    return first, last, base


@triton.jit
def _carry_in(W, segment, part, lanes, inner, op, FLOATING: tl.constexpr, BLOCK_I: tl.constexpr):
    """The totals of the segment's chunks before `part` (scan order), combined in order: the carries (1, BLOCK_I) a
    chunk starts from. W holds (segments, parts, inner) totals, float32 (a second plane of sums after the maxima
    for logcumsumexp) or int64."""
    parts = tl.num_programs(2)
    at = segment.to(tl.int64) * parts * inner + lanes[None, :]
    plane = tl.num_programs(0).to(tl.int64) * parts * inner
    mask = lanes[None, :] < inner
    carry_m = tl.full([1, BLOCK_I], -float("inf"), tl.float32)
    carry_s = tl.zeros([1, BLOCK_I], dtype=tl.float32)
    carry = tl.zeros([1, BLOCK_I], dtype=tl.float32 if FLOATING else tl.int64)
    for p in range(0, part):
        if FLOATING:
            Wf = W.to(tl.pointer_type(tl.float32))
            if op == 1:
                m = tl.load(Wf + at + p * inner, mask=mask, other=-float("inf"))
                s = tl.load(Wf + plane + at + p * inner, mask=mask, other=0.0)
                carry_m, carry_s = _pair_combine(carry_m, carry_s, m, s)
            else:
                carry += tl.load(Wf + at + p * inner, mask=mask, other=0.0)
        else:
            carry += tl.load(W + at + p * inner, mask=mask, other=0)
    return carry, carry_m, carry_s


@triton.jit
def scan_kernel(
    X, Y, CU, W, n, inner, pitch, batch, varlen, reverse, op, chunk,
    CHUNKED: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    """Program (segment, lane block, part): with CHUNKED, positions [part * chunk, (part + 1) * chunk) in scan order
    of its segment's lines, starting from the totals of the parts before it (W); else the whole lines. CHUNKED is a
    variant key: the carry-in code in every variant cost unchunked scans along the last dim 11-22% (168 registers a
    thread against 128)."""
    wait_for_predecessor(PDL)
    segment = tl.program_id(0)
    floating: tl.constexpr = X.dtype.element_ty.is_floating()
    lanes = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    if CHUNKED:
        part = tl.program_id(2)
        k0 = part.to(tl.int64) * chunk
        carry, carry_m, carry_s = _carry_in(W, segment, part, lanes, inner, op, floating, BLOCK_I)
    else:
        k0 = n * 0
        carry_m = tl.full([1, BLOCK_I], -float("inf"), tl.float32)  # logcumsumexp's running (max, sum) in base 2
        carry_s = tl.zeros([1, BLOCK_I], dtype=tl.float32)
        carry = tl.zeros([1, BLOCK_I], dtype=tl.float32 if floating else tl.int64)
    if BLOCK_I == 1:
        carry, carry_m, carry_s = tl.reshape(carry, [1]), tl.reshape(carry_m, [1]), tl.reshape(carry_s, [1])
    if BLOCK_I == 1 and varlen == 0 and reverse == 0:  # the common row: its own code, whose accesses vectorize
        row = segment.to(tl.int64) * n
        if CHUNKED:
            k_stop = k0 + chunk
        else:
            k_stop = n
        _scan_row(X + row, Y + row, 0, n, k0, k_stop, 0, op, carry, carry_m, carry_s, BLOCK_T, True, floating)
    else:
        first, last, base = _segment(CU, segment, n, inner, batch, varlen)
        if CHUNKED:
            k_stop = k0 + chunk
        else:
            k_stop = last - first
        if BLOCK_I == 1:
            _scan_row(X + base, Y + base, first, last, k0, k_stop, reverse, op, carry, carry_m, carry_s, BLOCK_T,
                      False, floating)  # fmt: skip
        else:
            k1 = tl.minimum(k_stop, last - first)
            step = tl.arange(0, BLOCK_T)
            is_last = (step == BLOCK_T - 1)[:, None]
            for start in range(0, tl.cdiv(k1 - k0, BLOCK_T)):
                k = k0 + start * BLOCK_T + step
                t = tl.where(reverse != 0, last - 1 - k, first + k)
                mask = (k < k1)[:, None] & (lanes[None, :] < pitch)
                offs = base + t[:, None] * pitch + lanes[None, :]
                carry, carry_m, carry_s = _scan_block(X, Y, offs, mask, carry, carry_m, carry_s, is_last, op,
                                                      floating)  # fmt: skip


@triton.jit
def scan_totals_kernel(
    X, CU, W, n, inner, pitch, batch, varlen, reverse, op, chunk,
    BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    """Program (segment, lane block, part) as in scan_kernel: the total of its chunk per lane into W (see
    _carry_in), the sum or logcumsumexp's (max, sum of 2 ** (x - max)) pair in base 2."""
    wait_for_predecessor(PDL)
    segment = tl.program_id(0)
    part = tl.program_id(2)
    floating: tl.constexpr = X.dtype.element_ty.is_floating()
    first, last, base = _segment(CU, segment, n, inner, batch, varlen)
    k0 = part.to(tl.int64) * chunk
    k1 = tl.minimum(k0 + chunk, last - first)
    lanes = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    step = tl.arange(0, BLOCK_T)
    total = tl.zeros([BLOCK_I], dtype=tl.float32 if floating else tl.int64)
    total_m = tl.full([BLOCK_I], -float("inf"), tl.float32)
    total_s = tl.zeros([BLOCK_I], dtype=tl.float32)
    for start in range(0, tl.cdiv(k1 - k0, BLOCK_T)):
        k = k0 + start * BLOCK_T + step
        if BLOCK_I == 1:  # a line along the last dim: 1-D blocks, contiguous (and vectorized) when forward
            if varlen == 0 and reverse == 0:  # two bounds, each a known multiple of 16 there (see _scan_row)
                offs = base + k
                mask = (k < k0 + chunk) & (k < n)
            else:
                offs = base + tl.where(reverse != 0, last - 1 - k, first + k)
                mask = k < k1
        else:
            t = tl.where(reverse != 0, last - 1 - k, first + k)
            mask = (k < k1)[:, None] & (lanes[None, :] < pitch)
            offs = base + t[:, None] * pitch + lanes[None, :]
        if floating:
            if op == 1:
                x = tl.load(X + offs, mask=mask, other=float("-inf")).to(tl.float32) * LOG2E
                m, s = tl.reduce((x, tl.full(x.shape, 1.0, tl.float32)), 0, _pair_combine)
                total_m, total_s = _pair_combine(total_m, total_s, m, s)
            else:
                total += tl.sum(tl.load(X + offs, mask=mask, other=0).to(tl.float32), 0)
        else:
            total += tl.sum(tl.load(X + offs, mask=mask, other=0).to(tl.int64), 0)
    parts = tl.num_programs(2)
    at = (segment.to(tl.int64) * parts + part) * inner + lanes
    if floating:
        Wf = W.to(tl.pointer_type(tl.float32))
        if op == 1:
            tl.store(Wf + at, total_m, mask=lanes < inner)
            tl.store(Wf + tl.num_programs(0).to(tl.int64) * parts * inner + at, total_s, mask=lanes < inner)
        else:
            tl.store(Wf + at, total, mask=lanes < inner)
    else:
        tl.store(W + at, total, mask=lanes < inner)


FLOAT_TYPES = ["fp16", "bf16", "fp32"]
SCAN_TYPES = FLOAT_TYPES + ["i32", "i64", "bool"]


def scan_types(values) -> bool:
    """Floats keep their dtype; integers and bool sum into int64."""
    return values["O"] == (values["T"] if values["T"] in FLOAT_TYPES else "i64")


ROWS = Config({"BLOCK_T": 2048, "BLOCK_I": 1}, num_warps=4, when="inner == 1")
# cumsum (op 0) over lanes: 512 lanes over 2 warps, every thread holding all BLOCK_T positions of its 8 lanes, so the
# tile's scan along its rows stays in registers
CUMSUM_LANES = Config({"BLOCK_T": 8, "BLOCK_I": 512}, num_warps=2, when="op == 0")
# logcumsumexp over lanes: the wide tile and a loop over positions ran it slower (see above)
LANES = Config({"BLOCK_T": 32, "BLOCK_I": 64}, num_warps=4)


def scan_configs(target: Target, keys) -> list[Config]:
    """Rows, cumsum's lanes, then logcumsumexp's lanes; integers only sum (csrc/ops/scan.c), so their lanes take
    cumsum's config with no predicate."""
    if keys["T"] in FLOAT_TYPES:
        return [ROWS, CUMSUM_LANES, LANES]
    return [ROWS, replace(CUMSUM_LANES, when="")]


SCAN_ARGS = [
    i64("n", aligned=True),
    i64("inner"),
    # inner again where lanes follow the scan dim (16 where they do not, so that the rows keep n's hint): hinted a
    # multiple of 8, it lets the lane tiles' accesses and masks vectorize; unhinted, every element is a 2-byte load
    # and store (SASS of the bf16 variants)
    i64("pitch", aligned=True, divisor=8),
    i32("batch"),
    i32("varlen"),
    i32("reverse"),
    i32("op"),
    i64("chunk", aligned=True),  # a multiple of 16 (csrc/ops/scan.c), so a row's chunks stay aligned
]

KERNELS = [
    Kernel(
        fn=scan_kernel,
        op="scan",
        args=[
            ptr("X", "T"),
            ptr("Y", "O"),
            ptr("CU", "i32", aligned=False),
            ptr("W", "i64", aligned=False),
            *SCAN_ARGS,
        ],
        keys={"T": SCAN_TYPES, "O": FLOAT_TYPES + ["i64"], "CHUNKED": [False, True]},
        combos=scan_types,
        grid_args=[i64("segments"), i64("parts")],
        grid=["segments", "cdiv(inner, BLOCK_I)", "parts"],
        configs=scan_configs,
        # the lanes a program takes, by which csrc/ops/scan.c counts the programs before it chunks the scan dim
        exports={"LANES": LANES.constexprs["BLOCK_I"], "CUMSUM_LANES": CUMSUM_LANES.constexprs["BLOCK_I"]},
    ),
    Kernel(
        fn=scan_totals_kernel,
        op="scan",
        args=[ptr("X", "T"), ptr("CU", "i32", aligned=False), ptr("W", "i64", aligned=False), *SCAN_ARGS],
        keys={"T": SCAN_TYPES},
        grid_args=[i64("segments"), i64("parts")],
        grid=["segments", "cdiv(inner, BLOCK_I)", "parts"],
        configs=scan_configs,
    ),
]
