"""Normalization: rms_norm over the last dim, optionally fused with a residual add (h = x + r; y = norm(h)).

One program per row. Rows up to 8192 columns stay in registers (one read of x); longer rows loop twice
over the row (sum of squares, then normalize), re-reading from L2.
"""

import triton
import triton.language as tl

from aot.spec import Kernel, f32, i32, i64, ptr
from kernels_src._rows import row_configs


@triton.jit
def rms_norm_kernel(
    X,
    W,
    R,
    Y,
    H,
    stride_x,
    stride_r,
    stride_y,
    stride_h,
    n_cols,
    eps,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOP: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    X += row * stride_x
    Y += row * stride_y
    if HAS_RESIDUAL:
        R += row * stride_r
        H += row * stride_h
    cols = tl.arange(0, BLOCK_N)
    if not LOOP:
        mask = cols < n_cols
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            x += tl.load(R + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(H + cols, x.to(H.dtype.element_ty), mask=mask)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
    else:
        squares = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            c = start + cols
            mask = c < n_cols
            x = tl.load(X + c, mask=mask, other=0.0).to(tl.float32)
            if HAS_RESIDUAL:
                x += tl.load(R + c, mask=mask, other=0.0).to(tl.float32)
                tl.store(H + c, x.to(H.dtype.element_ty), mask=mask)
            squares += x * x
        rstd = tl.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK_N):
            c = start + cols
            mask = c < n_cols
            x = tl.load(X + c, mask=mask, other=0.0).to(tl.float32)
            if HAS_RESIDUAL:
                x += tl.load(R + c, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(W + c, mask=mask, other=0.0).to(tl.float32)
            tl.store(Y + c, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


KERNELS = [
    Kernel(
        fn=rms_norm_kernel,
        op="rms_norm",
        args=[
            ptr("X", "T"),
            ptr("W", "T"),
            ptr("R", "T"),
            ptr("Y", "T"),
            ptr("H", "T"),
            i64("stride_x", aligned=True),
            i64("stride_r", aligned=True),
            i64("stride_y", aligned=True),
            i64("stride_h", aligned=True),
            i32("n_cols", aligned=True),
            f32("eps"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"], "HAS_RESIDUAL": [False, True]},
        grid_args=[i64("n_rows")],
        grid=["n_rows", "1", "1"],
        configs=row_configs(),
    ),
]
