"""The softmax family over the last dim (softmax, log_softmax, logsumexp), any length: rows up to 8192 are held
whole in registers; longer rows take two passes (an online max and sum over blocks, then the normalized write)."""

import triton
import triton.language as tl

from aot.spec import Kernel, i32, i64, ptr
from kernels_src._rows import row_configs


@triton.jit
def softmax_kernel(X, Y, stride_x, stride_y, n_cols, mode, BLOCK_N: tl.constexpr, LOOP: tl.constexpr):
    """mode 0: softmax, 1: log_softmax (rows of Y like X's), 2: logsumexp (one value per row at Y + row * stride_y).
    A row of -inf gives logsumexp -inf and NaN softmax / log_softmax, as torch does."""
    row = tl.program_id(0).to(tl.int64)
    X += row * stride_x
    Y += row * stride_y
    cols = tl.arange(0, BLOCK_N)
    if not LOOP:
        mask = cols < n_cols
        x = tl.load(X + cols, mask=mask, other=-float("inf")).to(tl.float32)
        row_max = tl.max(x, axis=0)
        safe = tl.where(row_max == -float("inf"), 0.0, row_max)
        e = tl.exp(x - safe)
        total = tl.sum(e, axis=0)
        if mode == 0:
            tl.store(Y + cols, (e / total).to(Y.dtype.element_ty), mask=mask)
        elif mode == 1:
            tl.store(Y + cols, (x - safe - tl.log(total)).to(Y.dtype.element_ty), mask=mask)
        else:
            tl.store(Y, (safe + tl.log(total)).to(Y.dtype.element_ty))
    else:
        # per-lane running max and sum, rescaled as the max grows; combined across lanes at the end
        m = tl.full([BLOCK_N], -float("inf"), dtype=tl.float32)
        s = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            c = start + cols
            x = tl.load(X + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            lane_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            s = s * tl.exp(m - lane_safe) + tl.exp(x - lane_safe)
            m = m_new
        row_max = tl.max(m, axis=0)
        safe = tl.where(row_max == -float("inf"), 0.0, row_max)
        total = tl.sum(s * tl.exp(m - safe), axis=0)
        if mode == 2:
            tl.store(Y, (safe + tl.log(total)).to(Y.dtype.element_ty))
        else:
            log_total = tl.log(total)
            for start in range(0, n_cols, BLOCK_N):
                c = start + cols
                mask = c < n_cols
                x = tl.load(X + c, mask=mask, other=-float("inf")).to(tl.float32)
                if mode == 0:
                    y = tl.exp(x - safe) / total
                else:
                    y = x - safe - log_total
                tl.store(Y + c, y.to(Y.dtype.element_ty), mask=mask)


KERNELS = [
    Kernel(
        fn=softmax_kernel,
        op="softmax",
        args=[
            ptr("X", "T"),
            ptr("Y", "T"),
            i64("stride_x", aligned=True),
            i64("stride_y", aligned=True),
            i32("n_cols", aligned=True),
            i32("mode"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows")],
        grid=["n_rows", "1", "1"],
        configs=row_configs(),
    ),
]
