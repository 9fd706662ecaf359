"""Rotary position embeddings: flash-attn's apply_rotary (dense or varlen x, offsets per batch element, partial
rotary, GPT-NeoX halves or GPT-J interleaved pairs, in place or not), the servers' rotary_qk (q and k rotated in
place in one launch from a position id per token), and Xopes' lrpe_cosine ([x cos(t theta), x sin(t theta)]).

Every program handles one token and a block of heads (of x, and of K for rotary_qk). The position source and
whether there is a K are run-time scalars; the layout (halves or interleaved pairs) is a variant key (INTERLEAVED):
with both layouts in one binary, holding x's and K's tiles at once took 236 registers a thread against 128, and
rotary_qk ran 30% slower."""

import triton
import triton.language as tl
from triton.language.extra import libdevice

from aot.spec import Config, Kernel, i32, i64, ptr
from kernels_src._pdl import wait_for_predecessor


@triton.jit
def _load_halves(R, rows_ok, start, half, interleaved: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    """Columns [start, start + BLOCK_HALF) of the rotated halves of the rows at R ((BLOCK_H, 1) pointers), as
    float32: (j, j + half), or the pairs (2j, 2j + 1) when interleaved, loaded as they lie and split in registers."""
    jj = start + tl.arange(0, BLOCK_HALF)[None, :]
    if interleaved:
        pair_cols = 2 * start + tl.arange(0, 2 * BLOCK_HALF)[None, :]
        x = tl.load(R + pair_cols, mask=rows_ok & (pair_cols < 2 * half), other=0.0).to(tl.float32)
        a, b = tl.split(tl.reshape(x, (BLOCK_H, BLOCK_HALF, 2)))
    else:
        a = tl.load(R + jj, mask=rows_ok & (jj < half), other=0.0).to(tl.float32)
        b = tl.load(R + jj + half, mask=rows_ok & (jj < half), other=0.0).to(tl.float32)
    return a, b


@triton.jit
def _store_rotated(R, rows_ok, start, half, interleaved: tl.constexpr, a, b, c, s, BLOCK_H: tl.constexpr,
                   BLOCK_HALF: tl.constexpr):  # fmt: skip
    """The halves a and b rotated by (c, s), stored where _load_halves read them."""
    ra = (a * c - b * s).to(R.dtype.element_ty)
    rb = (a * s + b * c).to(R.dtype.element_ty)
    jj = start + tl.arange(0, BLOCK_HALF)[None, :]
    if interleaved:
        pair_cols = 2 * start + tl.arange(0, 2 * BLOCK_HALF)[None, :]
        tl.store(R + pair_cols, tl.reshape(tl.join(ra, rb), (BLOCK_H, 2 * BLOCK_HALF)),
                 mask=rows_ok & (pair_cols < 2 * half))  # fmt: skip
    else:
        tl.store(R + jj, ra, mask=rows_ok & (jj < half))
        tl.store(R + jj + half, rb, mask=rows_ok & (jj < half))


@triton.jit
def _rotate_heads(
    X, Y, K, COS, SIN, pos, n_pos, stride_cs, heads, heads_k, half, tail_end, stride_xh, stride_yh, stride_kh,
    interleaved: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
):  # fmt: skip
    """Rotate heads [0, heads) of one token of x into Y and heads [0, heads_k) of K in place (X, Y and K point at the
    token's first head in the block) by row `pos` of the COS and SIN tables, and copy x's columns [2 * half,
    tail_end) unrotated. Both tensors' loads are issued before either's stores: rotating x's heads and then K's
    waited twice on memory (rotary_qk 4-9% faster in the wheel on an H100, h100-2026-11-24-experiments.md). Every
    thread stores only elements it loaded itself, so Y may be X. A position outside the table is left unrotated:
    cos 1, sin 0. The table is read after x, so a position still on its way from memory does not hold up x's
    loads. Without a K (apply_rotary) its loads and stores are masked off: branching around them instead made
    apply_rotary 12% slower."""
    h = tl.arange(0, BLOCK_H)[:, None]
    XR, YR, KR = X + h * stride_xh, Y + h * stride_yh, K + h * stride_kh
    for start in range(0, half, BLOCK_HALF):
        a, b = _load_halves(XR, h < heads, start, half, interleaved, BLOCK_H, BLOCK_HALF)
        ak, bk = _load_halves(KR, h < heads_k, start, half, interleaved, BLOCK_H, BLOCK_HALF)
        c, s = _table_row(COS, SIN, pos, n_pos, stride_cs, start + tl.arange(0, BLOCK_HALF), half)
        _store_rotated(YR, h < heads, start, half, interleaved, a, b, c, s, BLOCK_H, BLOCK_HALF)
        _store_rotated(KR, h < heads_k, start, half, interleaved, ak, bk, c, s, BLOCK_H, BLOCK_HALF)
    for start in range(2 * half, tail_end, 2 * BLOCK_HALF):
        cols = start + tl.arange(0, 2 * BLOCK_HALF)[None, :]
        mask = (h < heads) & (cols < tail_end)
        tl.store(YR + cols, tl.load(XR + cols, mask=mask), mask=mask)


@triton.jit
def _table_row(COS, SIN, pos, n_pos, stride_cs, jj, half):
    """Columns jj of row `pos` of the cos and sin tables as (1, len(jj)) float32; cos 1 and sin 0 outside the table."""
    inside = (pos >= 0) & (pos < n_pos)
    row = tl.where(inside, pos, 0) * stride_cs
    c = tl.load(COS + row + jj, mask=(jj < half) & inside, other=1.0).to(tl.float32)
    s = tl.load(SIN + row + jj, mask=(jj < half) & inside, other=0.0).to(tl.float32)
    return c[None, :], s[None, :]


@triton.jit
def _rotary_token(
    X, Y, K, COS, SIN, OFFSETS, POSITIONS, token, s, b, block, outside,
    heads, heads_k, half, tail_end, n_pos, offset, pos_mode, interleaved: tl.constexpr,
    stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh, stride_ks, stride_kh, stride_cs,
    BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
):  # fmt: skip
    """Token `token` of x (token s of sequence b), head block `block`; `outside`: it belongs to no sequence."""
    if pos_mode == 0:
        pos = s + offset
    elif pos_mode == 1:
        pos = s + tl.load(OFFSETS + b)
    else:
        pos = tl.load(POSITIONS + token).to(tl.int64)
    pos = tl.where(outside, -1, pos)
    h0 = block * BLOCK_H  # this program's block of x's heads and the same block of K's (a few k heads make too
    # little work for programs of their own)
    _rotate_heads(
        X + b * stride_xb + token * stride_xs + h0 * stride_xh, Y + b * stride_yb + token * stride_ys + h0 * stride_yh,
        K + token * stride_ks + h0 * stride_kh, COS, SIN, pos, n_pos, stride_cs, heads - h0, heads_k - h0, half,
        tail_end, stride_xh, stride_yh, stride_kh, interleaved, BLOCK_H, BLOCK_HALF,
    )  # fmt: skip


@triton.jit
def rotary_kernel(
    X, Y, K, COS, SIN, OFFSETS, POSITIONS, CU_SEQLENS,
    heads, heads_k, half, tail_end, n_pos, offset, total, pos_mode, varlen,
    stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh, stride_ks, stride_kh, stride_cs,
    BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr, INTERLEAVED: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    """Program (s, b, head block): token s of sequence b, its block of x's heads and of K's (rotated in place).
    Positions: s + offset (pos_mode 0), s + OFFSETS[b] (1), POSITIONS[token] (2).
    varlen: sequence b spans tokens CU_SEQLENS[b]:CU_SEQLENS[b + 1] of x (stride_xb and stride_yb are then 0), and
    the grid's last row of programs copies the tokens after the last sequence, up to `total`, unrotated."""
    wait_for_predecessor(PDL)
    s = tl.program_id(0).to(tl.int64)
    b = tl.program_id(1)
    block = tl.program_id(2)
    if varlen:
        first = tl.load(CU_SEQLENS + b).to(tl.int64)
        outside = b == tl.num_programs(1) - 1
        last = tl.where(outside, total, tl.load(CU_SEQLENS + b + 1, mask=not outside, other=0).to(tl.int64))
        for token in range(first + s, last, tl.num_programs(0)):
            _rotary_token(
                X, Y, K, COS, SIN, OFFSETS, POSITIONS, token, token - first, b, block, outside,
                heads, heads_k, half, tail_end, n_pos, offset, pos_mode, INTERLEAVED,
                0, stride_xs, stride_xh, 0, stride_ys, stride_yh, stride_ks, stride_kh, stride_cs,
                BLOCK_H, BLOCK_HALF,
            )  # fmt: skip
    else:
        _rotary_token(
            X, Y, K, COS, SIN, OFFSETS, POSITIONS, s, s, b, block, False,
            heads, heads_k, half, tail_end, n_pos, offset, pos_mode, INTERLEAVED,
            stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh, stride_ks, stride_kh, stride_cs,
            BLOCK_H, BLOCK_HALF,
        )  # fmt: skip


@triton.jit
def lrpe_cosine_kernel(
    X, THETA, Y, heads, head_dim, offset,
    stride_xb, stride_xs, stride_xh, stride_th, stride_td, stride_yb, stride_ys, stride_yh,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    """Program (s, b, head block): y[..., :d] = x cos(t theta), y[..., d:] = x sin(t theta) with t = s + offset.
    theta is float32 with a row stride (0 when broadcast) and stride_td 1, or 0 for one value per head. The angle
    is formed and reduced to [-pi, pi] in float64 (t theta is exact there), so float32 sin and cos see a small
    argument whatever t is."""
    wait_for_predecessor(PDL)
    s = tl.program_id(0)
    b = tl.program_id(1)
    h = tl.program_id(2) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    t = (s.to(tl.int64) + offset).to(tl.float64)
    X += b * stride_xb + s.to(tl.int64) * stride_xs
    Y += b * stride_yb + s.to(tl.int64) * stride_ys
    for start in range(0, head_dim, BLOCK_D):
        d = start + tl.arange(0, BLOCK_D)[None, :]
        mask = (h < heads) & (d < head_dim)
        x = tl.load(X + h * stride_xh + d, mask=mask, other=0.0).to(tl.float32)
        if stride_td == 0:  # one theta per head: broadcast along the row
            theta = tl.load(THETA + h * stride_th + d * 0, mask=mask, other=0.0)
        else:
            theta = tl.load(THETA + h * stride_th + d, mask=mask, other=0.0)
        angle = t * theta.to(tl.float64)
        turns = tl.floor(angle * 0.15915494309189535 + 0.5)  # 1 / (2 pi)
        reduced = (angle - turns * 6.283185307179586).to(tl.float32)
        # the hardware's sin and cos (absolute error < 1e-6 on [-pi, pi]): libdevice's full-range ones made the
        # kernel arithmetic-bound at 60% of the copy bandwidth (CUDA only; a HIP build needs its own)
        c, sn = libdevice.fast_cosf(reduced), libdevice.fast_sinf(reduced)
        tl.store(Y + h * stride_yh + d, (x * c).to(Y.dtype.element_ty), mask=mask)
        tl.store(Y + h * stride_yh + head_dim + d, (x * sn).to(Y.dtype.element_ty), mask=mask)


def _rotary_configs() -> list[Config]:
    """Tiles of 4096 to 8192 elements (a block of heads by 2 * BLOCK_HALF columns), looping past rotary dims of 256:
    the larger tiles read 3-4% faster than 2048-element ones on the H100 (benchmarks/experiments/rotary_tiles.py).
    Calls that miss the alignment hints (a rotary half not a multiple of 8, odd strides: rare) all take the last
    tile, which serves any size (a build-time trim)."""
    return [
        Config({"BLOCK_HALF": 32, "BLOCK_H": 64}, num_warps=4, when="half <= 32", fallback=False),
        Config({"BLOCK_HALF": 64, "BLOCK_H": 32}, num_warps=4, when="half <= 64", fallback=False),
        Config({"BLOCK_HALF": 128, "BLOCK_H": 16}, num_warps=4),
    ]


def _lrpe_configs() -> list[Config]:
    """Blocks of 16 heads by 64 columns, looping past 64: faster than 128-column blocks, whose sin and cos run out
    of registers (same experiment). Unaligned calls take the last tile, as in _rotary_configs."""
    return [
        Config({"BLOCK_D": 32, "BLOCK_H": 32}, num_warps=4, when="head_dim <= 32", fallback=False),
        Config({"BLOCK_D": 64, "BLOCK_H": 16}, num_warps=4),
    ]


def _strides(*names: str) -> list:
    return [i64(n, aligned=True, divisor=8) for n in names]


KERNELS = [
    Kernel(
        fn=rotary_kernel,
        op="rotary",
        args=[
            ptr("X", "T"),
            ptr("Y", "T"),
            ptr("K", "T"),
            ptr("COS", "T"),
            ptr("SIN", "T"),
            ptr("OFFSETS", "i32", aligned=False),
            ptr("POSITIONS", "i64", aligned=False),
            ptr("CU_SEQLENS", "i32", aligned=False),
            i32("heads"),
            i32("heads_k"),
            i32("half", aligned=True, divisor=8),
            i32("tail_end"),
            i64("n_pos"),
            i64("offset"),
            i64("total"),
            i32("pos_mode"),
            i32("varlen"),
            *_strides("stride_xb", "stride_xs", "stride_xh", "stride_yb", "stride_ys", "stride_yh"),
            *_strides("stride_ks", "stride_kh", "stride_cs"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"], "INTERLEAVED": [False, True]},
        grid_args=[i64("seqlen"), i64("batch")],
        grid=["seqlen", "batch + varlen", "cdiv(max(heads, heads_k), BLOCK_H)"],
        configs=_rotary_configs(),
    ),
    Kernel(
        fn=lrpe_cosine_kernel,
        op="lrpe_cosine",
        args=[
            ptr("X", "T"),
            ptr("THETA", "fp32"),
            ptr("Y", "T"),
            i32("heads"),
            i32("head_dim", aligned=True, divisor=8),
            i64("offset"),
            *_strides("stride_xb", "stride_xs", "stride_xh"),
            i64("stride_th"),
            i64("stride_td"),
            *_strides("stride_yb", "stride_ys", "stride_yh"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("seqlen"), i64("batch")],
        grid=["seqlen", "batch", "cdiv(heads, BLOCK_H)"],
        configs=_lrpe_configs(),
    ),
]
