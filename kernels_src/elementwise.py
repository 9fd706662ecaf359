"""Elementwise ops with torch's broadcasting: arithmetic, comparisons, bitwise ops and unary math.

The op is a run-time code (XOPSAOT_EW_* of the C header, uniform over a launch), so a few binaries per (input dtype,
output dtype) serve them all. x and y share one dtype T (the caller promotes first); out is T, or bool for the
comparisons and isinf/isnan. float16/bfloat16 compute in float32 (torch's opmath), integers and bool in their own
type (integer overflow wraps, as in torch).

Two kernels:
- elementwise_kernel: out contiguous; each input contiguous, one element, a row vector repeated over rows (a bias:
  offset i % inner), a column vector (offset i // inner) or a scalar passed by value. Compiled with alignment hints
  only (16-byte pointers, inner a multiple of 16), so every access vectorizes; the op layer sends anything else to
  the strided kernel. Compiled up to three times per dtype pair: the light ops (OPS=1), the binary math ops (OPS=2:
  division, pow) and the unary math ops (OPS=3: exp, rsqrt, sin, cos), as long code costs the ops that share its
  binary registers, and bandwidth with them; division and exp also have binaries of their own (FIXED_OP).
- elementwise_strided_kernel: any strides over up to 4 dims (after merging), tiled rows x columns so that index
  division happens once per row, not per element (once per tile when the tile stays within a run of dim 2), and
  16-byte accesses where the C side finds the launch aligned.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice

from aot.spec import ALIGNED_ONLY, Config, Kernel, f32, i32, i64, ptr
from kernels_src._pdl import wait_for_predecessor

# Operand modes of elementwise_kernel (the C launcher picks them).
#   0 contiguous, 1 one element, 2 row vector (i % inner), 3 column vector (i // inner), 4 the scalar argument
# Op codes: binary 0-15, unary 16-25 (XOPSAOT_EW_* in include/xopsaot.h; SUB arrives as ADD with -alpha).
#   0 add  1 mul  2 div  3 div trunc  4 div floor  5 pow  6 bitwise_and  7 bitwise_or  8 maximum  9 minimum
#   10 eq  11 ne  12 lt  13 le  14 gt  15 ge
#   16 neg  17 abs  18 exp  19 rsqrt  20 sin  21 cos  22 isinf  23 isnan  24 bitwise_not  25 clamp


@triton.jit
def _compute_type(v):
    """float16/bfloat16 widen to float32; float32, integers and bool stay."""
    if v.dtype.is_floating():
        v = v.to(tl.float32)
    return v


@triton.jit
def _scalar_operand(P, offs, fs, is_):
    """The scalar argument, in P's compute type, broadcast to offs' shape."""
    if P.dtype.element_ty.is_floating():
        v = tl.zeros(offs.shape, dtype=tl.float32) + fs
    else:
        v = tl.zeros(offs.shape, dtype=P.dtype.element_ty) + is_.to(P.dtype.element_ty)
    return v


@triton.jit
def _load(P, index, mask, MASKED: tl.constexpr):
    if MASKED:
        v = tl.load(P + index, mask=mask, other=0)
    else:
        v = tl.load(P + index)
    return _compute_type(v)


@triton.jit
def _operand(P, offs, cols, c0, row0, mode, inner, fs, is_, mask, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    """One input of elementwise_kernel in its compute type. cols are the block's offsets within its first row
    (starting at c0), row0 that row: one int64 division per block. Each mode loads in its own branch: an index
    merged across branches would lose its known contiguity. One element and a column's one or two values per block
    are scalar loads, broadcast."""
    if mode == 0:
        v = _load(P, offs, mask, MASKED)
    elif mode == 1:
        one = tl.load(P)
        v = _compute_type(tl.where(offs >= 0, one, one))
    elif mode == 2:
        if inner >= BLOCK:  # a block spans at most two rows: a compare, not a division per element
            v = _load(P, cols - inner * (cols >= inner), mask, MASKED)
        else:
            v = _load(P, cols % inner, mask, MASKED)
    elif mode == 3:
        if inner >= BLOCK:
            first = tl.load(P + row0)
            second = tl.load(P + row0 + 1, mask=c0 + BLOCK > inner)  # only when the block reaches the next row
            v = _compute_type(tl.where(cols >= inner, second, first))
        else:
            v = _load(P, row0 + cols // inner, mask, MASKED)
    else:
        v = _scalar_operand(P, offs, fs, is_)
    return v


@triton.jit
def _int_pow(x, e):
    """x ** e for integer tensors by squaring; a negative exponent gives 1, +-1 or 0 (torch's integer pow)."""
    bits: tl.constexpr = x.dtype.primitive_bitwidth
    result = tl.full(x.shape, 1, x.dtype)
    base = x
    exp = tl.where(e > 0, e, 0)
    for _ in range(bits):
        result = tl.where((exp & 1) != 0, result * base, result)
        base = base * base
        exp = exp >> 1
    negative = tl.where(x == 1, 1, tl.where(x == -1, 1 - 2 * (e & 1), 0)).to(x.dtype)
    return tl.where(e < 0, negative, result)


@triton.jit
def _float_div_floor(x, y):
    """Python's floor division for floats (torch's div_floor_floating): the fmod form avoids rounding x / y across
    an integer."""
    quotient = libdevice.div_rn(x, y)
    mod = libdevice.fmod(x, y)
    div = libdevice.div_rn(x - mod, y)
    div = tl.where((mod != 0) & ((y < 0) != (mod < 0)), div - 1.0, div)
    floored = libdevice.floor(div)
    floored = tl.where(div - floored > 0.5, floored + 1.0, floored)
    exact = tl.where(div != 0, floored, libdevice.copysign(tl.zeros_like(div), quotient))
    return tl.where(y == 0, quotient, exact)


@triton.jit
def _unary_math(x, op):
    """exp (18), rsqrt (19), sin (20), cos (21) on floats: their own binary (OPS 3), as sharing pow's cost exp 6%
    of its bandwidth (benchmarks/experiments/exp_math.py). Integers never get them (the C side refuses)."""
    if not x.dtype.is_floating():
        r = x
    elif op == 18:
        r = libdevice.exp(x)
    elif op == 19:
        r = libdevice.rsqrt(x)
    elif op == 20:
        r = tl.sin(x)
    else:
        r = tl.cos(x)
    return r


@triton.jit
def _math(x, y, op):
    """The ops with long code (kept out of the light variants, whose registers it would cost): div (2), trunc (3),
    floor (4), pow (5). Integers have trunc, floor and pow."""
    if x.dtype.is_floating():
        if op == 2:  # IEEE division (Triton's / is approximate): exact quotients stay exact, as in torch
            r = libdevice.div_rn(x, y)
        elif op == 3:
            r = libdevice.trunc(libdevice.div_rn(x, y))
        elif op == 4:
            r = _float_div_floor(x, y)
        else:
            r = libdevice.pow(x, y)
    else:
        if op == 3:
            r = x // y
        elif op == 4:
            q = x // y
            r = tl.where(((x % y) != 0) & ((x < 0) != (y < 0)), q - 1, q)
        else:
            r = _int_pow(x, y)
    return r


@triton.jit
def _arith(x, y, op, fa, ia):
    """Light binary ops on compute-typed x, y: add (x + alpha * y), mul, bitwise and/or, maximum/minimum."""
    if x.dtype.is_floating():
        nan_propagates: tl.constexpr = tl.PropagateNan.ALL
        if op == 0:
            r = x + fa * y
        elif op == 1:
            r = x * y
        elif op == 8:
            r = tl.maximum(x, y, propagate_nan=nan_propagates)
        else:
            r = tl.minimum(x, y, propagate_nan=nan_propagates)
    elif x.dtype == tl.int1:
        if op == 0:
            r = x | (y & (ia != 0))
        elif op == 1 or op == 6 or op == 9:
            r = x & y
        else:  # bitwise_or, maximum
            r = x | y
    else:
        if op == 0:
            r = x + ia.to(x.dtype) * y
        elif op == 1:
            r = x * y
        elif op == 6:
            r = x & y
        elif op == 7:
            r = x | y
        elif op == 8:
            r = tl.maximum(x, y)
        else:
            r = tl.minimum(x, y)
    return r


@triton.jit
def _compare(x, y, op):
    if op == 10:
        r = x == y
    elif op == 11:
        r = x != y
    elif op == 12:
        r = x < y
    elif op == 13:
        r = x <= y
    elif op == 14:
        r = x > y
    else:
        r = x >= y
    return r


@triton.jit
def _unary(x, op, fa, fb, ia, ib):
    """Light unary ops on a compute-typed x: neg, abs, bitwise_not, clamp(min=a, max=b)."""
    if x.dtype.is_floating():
        if op == 16:
            r = -x
        elif op == 17:
            r = tl.abs(x)
        else:  # clamp: NaN in x, min or max propagates
            nan_propagates: tl.constexpr = tl.PropagateNan.ALL
            r = tl.minimum(tl.maximum(x, fa, propagate_nan=nan_propagates), fb, propagate_nan=nan_propagates)
    elif x.dtype == tl.int1:
        r = x == 0  # bitwise_not
    else:
        if op == 16:
            r = -x
        elif op == 17:
            r = tl.abs(x)
        elif op == 24:
            r = ~x
        else:
            r = tl.minimum(tl.maximum(x, ia.to(x.dtype)), ib.to(x.dtype))
    return r


@triton.jit
def _special(x, op):
    """isinf (22) and isnan (23): false for integers and bool."""
    if x.dtype.is_floating():
        if op == 22:
            r = (x == float("inf")) | (x == float("-inf"))
        else:
            r = x != x
    else:
        r = x != x
    return r


@triton.jit
def _light(x, y, op, fa, fb, ia, ib):
    if op < 16:
        r = _arith(x, y, op, fa, ia)
    else:
        r = _unary(x, op, fa, fb, ia, ib)
    return r


@triton.jit
def _apply(x, y, op, fa, fb, ia, ib, BOOL_OUT: tl.constexpr, OPS: tl.constexpr):
    """The op on compute-typed x, y. A bool out of non-bool inputs is a comparison or isinf/isnan; bool inputs
    give bool for every op, so their variant dispatches on the op code alone. OPS: 0 every op, 1 the light ones,
    2 the _math ones, 3 the _unary_math ones."""
    if x.dtype == tl.int1:
        if op >= 10 and op < 16:
            r = _compare(x, y, op)
        elif op == 22 or op == 23:
            r = _special(x, op)
        else:
            r = _light(x, y, op, fa, fb, ia, ib)
    elif BOOL_OUT:
        if op < 16:
            r = _compare(x, y, op)
        else:
            r = _special(x, op)
    elif OPS == 1:
        r = _light(x, y, op, fa, fb, ia, ib)
    elif OPS == 2:
        r = _math(x, y, op)
    elif OPS == 3:
        r = _unary_math(x, op)
    else:
        if op >= 2 and op <= 5:
            r = _math(x, y, op)
        elif op >= 18 and op <= 21:
            r = _unary_math(x, op)
        else:
            r = _light(x, y, op, fa, fb, ia, ib)
    return r


@triton.jit
def _flat_block(
    X, Y, OUT, offs, cols, c0, row0, mask, op, mode_x, mode_y, inner, fa, fb, ia, ib, fs, is_,
    MASKED: tl.constexpr, OPS: tl.constexpr, FIXED_OP: tl.constexpr,
):  # fmt: skip
    block: tl.constexpr = offs.shape[0]
    x = _operand(X, offs, cols, c0, row0, mode_x, inner, fs, is_, mask, MASKED, block)
    if FIXED_OP >= 16:  # a unary op's own binary reads no y
        y = x
    else:
        y = _operand(Y, offs, cols, c0, row0, mode_y, inner, fs, is_, mask, MASKED, block)
    if FIXED_OP != 0:  # the op code as a constant: the op's own binary holds its code alone
        op = FIXED_OP
    r = _apply(x, y, op, fa, fb, ia, ib, OUT.dtype.element_ty == tl.int1, OPS).to(OUT.dtype.element_ty)
    if MASKED:
        tl.store(OUT + offs, r, mask=mask)
    else:
        tl.store(OUT + offs, r)


@triton.jit
def elementwise_kernel(
    X, Y, OUT, n, inner, op, mode_x, mode_y, fa, fb, ia, ib, fs, is_,
    OPS: tl.constexpr, FIXED_OP: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    wait_for_predecessor(PDL)
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    inner32 = inner.to(tl.int32)  # the launcher keeps inner below 2**31 - BLOCK
    if (mode_x == 2) | (mode_x == 3) | (mode_y == 2) | (mode_y == 3):
        # a row or a column vector: the block's row and its offset in it. Only here, as every thread runs the int64
        # division; always, it cost exp and division 1% of their bandwidth (exp_math.py)
        c0 = (start % inner).to(tl.int32)
        row0 = start // inner
    else:
        c0 = start.to(tl.int32) * 0
        row0 = start * 0
    cols = c0 + tl.arange(0, BLOCK)
    if start + BLOCK <= n:  # every block but the last: unmasked, so accesses vectorize whatever n is
        _flat_block(X, Y, OUT, offs, cols, c0, row0, None, op, mode_x, mode_y, inner32, fa, fb, ia, ib, fs, is_,
                    False, OPS, FIXED_OP)  # fmt: skip
    else:
        _flat_block(X, Y, OUT, offs, cols, c0, row0, offs < n, op, mode_x, mode_y, inner32, fa, fb, ia, ib, fs, is_,
                    True, OPS, FIXED_OP)  # fmt: skip


@triton.jit
def _strided_operand(P, outer, i2, cols, s2, s3, mask, scalar, fs, is_, UNIT: tl.constexpr, ALIGNED: tl.constexpr):
    """One operand's tile: rows at outer + i2 * s2 (outer: the offset of dims 0 and 1), columns at cols * s3."""
    if scalar != 0:
        v = _scalar_operand(P, i2[:, None] + cols[None, :], fs, is_)
    else:
        # UNIT: a unit stride is spelled as a literal 1, so the compiler sees the contiguity (the wheel passes every
        # stride at run time; unknown, they cost a transposed add 5x, benchmarks/experiments/strided_transpose.py).
        # Only where the tile's rows are a plain range: elsewhere it would double the code for little.
        # ALIGNED: each run along the contiguous dim starts 16 bytes aligned (the launcher checked the pointers and
        # strides), so accesses vectorize as in the JIT, which specializes on the values. The hint must be set here:
        # set inside a helper function, it lands on the helper's argument and is lost.
        if UNIT and s3 == 1:
            row_ptrs = P + (outer + i2 * s2)[:, None] + cols[None, :]
            if ALIGNED:
                row_ptrs = tl.multiple_of(row_ptrs, [1, 16])
            v = tl.load(row_ptrs, mask=mask, other=0)
        elif s2 == 1:  # transposed against out: read the tile along its contiguous rows, then transpose
            column_ptrs = P + (outer + i2)[None, :] + cols[:, None].to(tl.int64) * s3
            if ALIGNED:
                column_ptrs = tl.multiple_of(column_ptrs, [1, 16])
            v = tl.trans(tl.load(column_ptrs, mask=tl.trans(mask), other=0))
        else:
            v = tl.load(P + (outer + i2 * s2)[:, None] + cols[None, :].to(tl.int64) * s3, mask=mask, other=0)
        v = _compute_type(v)
    return v


@triton.jit
def _strided_tile(
    X, Y, OUT, rest, i2, cols, mask, d1, sx0, sx1, sx2, sx3, sy0, sy1, sy2, sy3, so0, so1, so2, so3,
    op, scalar_x, scalar_y, fa, fb, ia, ib, fs, is_, UNIT: tl.constexpr, ALIGNED: tl.constexpr, OPS: tl.constexpr,
):  # fmt: skip
    """The tile of rows (rest, i2) = divmod(row, d2), a scalar rest or one per row."""
    x_outer = (rest // d1) * sx0 + (rest % d1) * sx1
    x = _strided_operand(X, x_outer, i2, cols, sx2, sx3, mask, scalar_x, fs, is_, UNIT, ALIGNED)
    y_outer = (rest // d1) * sy0 + (rest % d1) * sy1
    y = _strided_operand(Y, y_outer, i2, cols, sy2, sy3, mask, scalar_y, fs, is_, UNIT, ALIGNED)
    r = _apply(x, y, op, fa, fb, ia, ib, OUT.dtype.element_ty == tl.int1, OPS).to(OUT.dtype.element_ty)
    out_off = (rest // d1) * so0 + (rest % d1) * so1 + i2 * so2
    if UNIT and so3 == 1:
        out_ptrs = OUT + out_off[:, None] + cols[None, :]
        if ALIGNED:  # as in _strided_operand
            out_ptrs = tl.multiple_of(out_ptrs, [1, 16])
        tl.store(out_ptrs, r, mask=mask)
    else:
        tl.store(OUT + out_off[:, None] + cols[None, :].to(tl.int64) * so3, r, mask=mask)


@triton.jit
def elementwise_strided_kernel(
    X, Y, OUT, n_rows, d1, d2, d3, sx0, sx1, sx2, sx3, sy0, sy1, sy2, sy3, so0, so1, so2, so3,
    op, scalar_x, scalar_y, fa, fb, ia, ib, fs, is_,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, TILED: tl.constexpr, ALIGNED: tl.constexpr, PDL: tl.constexpr = False,
    OPS: tl.constexpr = 0,
):  # fmt: skip
    """out[i0, i1, i2, i3] = f(x[...], y[...]) over dims (n_rows / (d1 d2), d1, d2, d3) with any strides (0 for a
    broadcast dim); scalar_x / scalar_y: that operand is the scalar argument instead. TILED: compile the path for
    tiles within one run of dim 2 (not for the narrow config of short rows, to keep its compile time). ALIGNED:
    only that path, for launches the C side found aligned (its `aligned` argument: d2 a multiple of BLOCK_R, d3 of
    16, 16-byte aligned pointers and strides multiples of 16 but for a unit one in dim 2 or 3). OPS: the ops whose
    code is compiled, as _apply's (0 every op)."""
    wait_for_predecessor(PDL)
    tiles_c = tl.cdiv(d3, BLOCK_C)
    pid = tl.program_id(0).to(tl.int64)
    row0 = (pid // tiles_c) * BLOCK_R
    rows = row0 + tl.arange(0, BLOCK_R)
    cols = (pid % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)
    if ALIGNED:
        # rows are all in range (d2, so n_rows, is a multiple of BLOCK_R), and d3 rebuilt as a multiple of 16 tells
        # the compiler the mask is constant over runs of 16 columns
        mask = tl.broadcast_to((cols < (d3 // 16) * 16)[None, :], (BLOCK_R, BLOCK_C))
        i2 = tl.multiple_of(row0 % d2, BLOCK_R) + tl.arange(0, BLOCK_R)
        _strided_tile(X, Y, OUT, row0 // d2, i2, cols, mask, d1, sx0, sx1, sx2, sx3, sy0, sy1, sy2, sy3, so0, so1, so2,
                      so3, op, scalar_x, scalar_y, fa, fb, ia, ib, fs, is_, True, True, OPS)  # fmt: skip
    else:
        mask = (rows[:, None] < n_rows) & (cols[None, :] < d3)
        if TILED and d2 % BLOCK_R == 0:
            # the tile stays within one run of dim 2: one scalar offset for dims 0 and 1 and a plain range along
            # dim 2, whose contiguity the compiler then sees (a transposed operand's loads coalesce)
            i2 = tl.multiple_of(row0 % d2, BLOCK_R) + tl.arange(0, BLOCK_R)
            _strided_tile(X, Y, OUT, row0 // d2, i2, cols, mask, d1, sx0, sx1, sx2, sx3, sy0, sy1, sy2, sy3, so0, so1,
                          so2, so3, op, scalar_x, scalar_y, fa, fb, ia, ib, fs, is_, True, False, OPS)  # fmt: skip
        else:
            _strided_tile(X, Y, OUT, rows // d2, rows % d2, cols, mask, d1, sx0, sx1, sx2, sx3, sy0, sy1, sy2,
                          sy3, so0, so1, so2, so3, op, scalar_x, scalar_y, fa, fb, ia, ib, fs, is_, False,
                          False, OPS)  # fmt: skip


# Input dtype T -> output dtypes O: its own, and bool for the comparisons (bool inputs only have bool).
TYPES = ["fp16", "bf16", "fp32", "i32", "i64", "bool"]


def type_pairs(values) -> bool:
    return values["O"] in (values["T"], "bool")


# Math ops with a binary of their own (FIXED_OP, floating point only), the common ones: without the other ops' code
# division runs 3% faster, exp 1% (benchmarks/experiments/exp_math.py). The C side looks for them by their keys,
# among the math ops (OPS 2 and 3) only.
FIXED_OPS = {2: 2, 18: 3}  # op code -> its OPS group
assert all(group in (2, 3) for group in FIXED_OPS.values()), "the C side looks among the math ops only"


def flat_combos(values) -> bool:
    """The math ops' variants exist for inputs with their own output dtype only: OPS 2 for non-bool ones, OPS 3
    (unary math) and the fixed ops for floating-point ones."""
    own, floating = values["O"] == values["T"], values["T"] in ("fp16", "bf16", "fp32")
    fixed = values["FIXED_OP"]
    if fixed:
        return own and floating and FIXED_OPS[fixed] == values["OPS"]
    if values["OPS"] == 2:
        return own and values["T"] != "bool"
    if values["OPS"] == 3:
        return own and floating
    return type_pairs(values)


def strided_configs(target, keys) -> list[Config]:
    """A tall aligned tile where the launch allows it, so a transposed operand's reads span 128 elements, 16 bytes at
    a time (benchmarks/experiments/strided_transpose.py): for floating-point ops with their own output dtype only,
    the common case, as the strided kernel's variants are the build's slowest after attention's. That tile also has
    a variant with the light ops' code alone (OPS 1: add, sub, mul, min, max, neg, abs, clamp), the C side's `light`:
    every op's code cost the tile 16-18% (H100, bf16, x.T + y through the JIT as the wheel launches it: 4096 x 4096
    2.17 -> 2.59 TB/s, 16384 x 8192 2.39 -> 2.92; torch.compile 2.70 and 2.90). In the wheel (wheel_ab.py strided,
    h100-2026-11-24-experiments.md): x.T + y 2.16-2.18 -> 2.61 at 4096 x 4096, 2.38-2.40 -> 2.92-2.93 at 8192 x
    16384 and 16384 x 8192; x * y with x's heads permuted, 32 x 4096 x 128, 2.23 -> 2.65."""
    aligned = "aligned && d3 >= 32 && d2 % 128 == 0"
    tile = {"BLOCK_R": 128, "BLOCK_C": 32, "TILED": True, "ALIGNED": True}
    tall = [
        Config({**tile, "OPS": 1}, num_warps=4, when=f"{aligned} && light"),
        Config({**tile, "OPS": 0}, num_warps=4, when=aligned),
    ]
    floating = keys["T"] == keys["O"] and keys["T"] in ("fp16", "bf16", "fp32")
    return (tall if floating else []) + [
        Config({"BLOCK_R": 16, "BLOCK_C": 128, "TILED": True, "ALIGNED": False, "OPS": 0}, num_warps=4,
               when="d3 >= 64"),
        Config({"BLOCK_R": 256, "BLOCK_C": 8, "TILED": False, "ALIGNED": False, "OPS": 0}, num_warps=4),
    ]  # fmt: skip


SCALARS = [f32("fa"), f32("fb"), i64("ia"), i64("ib"), f32("fs"), i64("is_")]
FLAT_BLOCK = 1024  # elements per program of elementwise_kernel

# The fixed ops' 16-bit binaries run at most 32 registers a thread, so that 16 programs of 4 warps fit on a
# multiprocessor: division's took 34, which the allocator rounds to 40, leaving room for 12. On an H200 the wheel's
# bf16 division read 3.97 TB/s at 16384 x 8192 against torch eager's 4.37, and a plain division kernel of 30
# registers 4.33 (benchmarks/experiments/div_forms.py, h200-2026-11-28-experiments.md); on an H100 both read copy
# speed. fp32 keeps its count: capped, it spills 24 bytes, and its programs hold twice the bytes in flight anyway.
FIXED_OP_MAXNREG = 32


def flat_configs(target, keys) -> list[Config]:
    """elementwise_kernel's one config, with the register cap for the fixed ops' 16-bit binaries on NVIDIA targets."""
    capped = keys["FIXED_OP"] != 0 and keys["T"] in ("fp16", "bf16") and target.backend == "cuda"
    return [Config({"BLOCK": FLAT_BLOCK}, num_warps=4, maxnreg=FIXED_OP_MAXNREG if capped else None)]


KERNELS = [
    Kernel(
        fn=elementwise_kernel,
        op="elementwise",
        args=[
            ptr("X", "T"),
            ptr("Y", "T"),
            ptr("OUT", "O"),
            i64("n"),
            i64("inner", aligned=True),
            i32("op"),
            i32("mode_x"),
            i32("mode_y"),
            *SCALARS,
        ],
        keys={"T": TYPES, "O": TYPES, "OPS": [1, 2, 3], "FIXED_OP": [0, *FIXED_OPS]},
        combos=flat_combos,
        grid=["cdiv(n, BLOCK)", "1", "1"],
        configs=flat_configs,
        aligned=ALIGNED_ONLY,
        exports={"BLOCK": FLAT_BLOCK},  # inner stays below 2**31 - BLOCK (int32 column arithmetic)
    ),
    Kernel(
        fn=elementwise_strided_kernel,
        op="elementwise",
        args=[
            ptr("X", "T", aligned=False),
            ptr("Y", "T", aligned=False),
            ptr("OUT", "O", aligned=False),
            i64("n_rows"),
            *[i64(name) for name in ("d1", "d2", "d3")],
            *[i64(f"s{t}{d}") for t in "xyo" for d in range(4)],
            i32("op"),
            i32("scalar_x"),
            i32("scalar_y"),
            *SCALARS,
        ],
        keys={"T": TYPES, "O": TYPES},
        combos=type_pairs,
        grid=["cdiv(n_rows, BLOCK_R) * cdiv(d3, BLOCK_C)", "1", "1"],
        grid_args=[i32("aligned"), i32("light")],
        configs=strided_configs,
    ),
]
