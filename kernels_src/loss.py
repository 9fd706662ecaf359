"""Cross entropy over rows of logits (class indices as targets, torch's ignore_index and label smoothing): one
program per row streams the row once, keeping a running max (one per block) and per-lane sums of exp, so each
logit costs one exp. A second kernel reduces the per-row losses for "sum" and "mean" in a fixed order."""

import triton
import triton.language as tl

from aot.spec import Config, Kernel, f32, i32, i64, ptr
from kernels_src._lse import online_lse_step
from kernels_src._pdl import wait_for_predecessor


@triton.jit
def row_loss(X, target, ignore_index, n_cols, smoothing, BLOCK_N: tl.constexpr):
    """The loss of the row at X, logsumexp(x) - (1 - smoothing) x[target] - smoothing * mean(x), in float32: 0 for
    a row whose target is ignore_index, NaN for a target outside [0, n_cols)."""
    valid = target != ignore_index
    in_range = (target >= 0) & (target < n_cols)
    # issued before the row's loop: its latency overlaps the stream (taking x[target] from the stream instead, a
    # 64-bit compare and select per logit, measured 65% of copy against 93% at 8192 x 128256)
    x_target = tl.load(X + target, mask=valid & in_range, other=0.0).to(tl.float32)
    cols = tl.arange(0, BLOCK_N)
    m = -float("inf")
    s = tl.zeros([BLOCK_N], dtype=tl.float32)
    total = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        c = start + cols
        mask = c < n_cols
        x = tl.load(X + c, mask=mask, other=-float("inf")).to(tl.float32)
        m, s = online_lse_step(m, s, x)
        total += tl.where(mask, x, 0.0)
    lse = m + tl.log(tl.sum(s, axis=0))  # -inf for a row of -inf
    loss = lse - (1.0 - smoothing) * x_target
    if smoothing > 0:  # skipped at 0, where a row holding -inf would give 0 * -inf
        loss -= smoothing * (tl.sum(total, axis=0) / n_cols)
    loss = tl.where(in_range, loss, float("nan"))
    return tl.where(valid, loss, 0.0)


@triton.jit
def cross_entropy_kernel(
    Logits, Target, Loss, stride_x, n_cols, ignore_index, smoothing, BLOCK_N: tl.constexpr, PDL: tl.constexpr = False
):
    """Loss[row] = row_loss of the row."""
    wait_for_predecessor(PDL)
    row = tl.program_id(0).to(tl.int64)
    target = tl.load(Target + row).to(tl.int64)
    loss = row_loss(Logits + row * stride_x, target, ignore_index, n_cols, smoothing, BLOCK_N)
    tl.store(Loss + row, loss.to(Loss.dtype.element_ty))


@triton.jit
def loss_reduce_kernel(Loss, Target, Out, n_rows, ignore_index, mean, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """Out = the sum of Loss over rows, divided by the rows whose target is not ignore_index when `mean` (NaN
    when there are none, as in torch)."""
    wait_for_predecessor(PDL)
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(0, n_rows, BLOCK):
        r = start + rows
        mask = r < n_rows
        acc += tl.load(Loss + r, mask=mask, other=0.0)
        t = tl.load(Target + r, mask=mask, other=ignore_index)
        count += tl.where(t != ignore_index, 1, 0)
    total = tl.sum(acc, axis=0)
    if mean:
        total = tl.math.div_rn(total, tl.sum(count, axis=0).to(tl.float32))
    tl.store(Out, total.to(Out.dtype.element_ty))


def per_row_dtypes(keys) -> bool:
    """Per-row losses in float32 (to be reduced) or in the logits' dtype (reduction "none")."""
    return keys["L"] in ("fp32", keys["T"])


KERNELS = [
    Kernel(
        fn=cross_entropy_kernel,
        op="cross_entropy",
        args=[
            ptr("Logits", "T"),
            ptr("Target", "I"),
            ptr("Loss", "L"),
            i64("stride_x", aligned=True),
            i32("n_cols", aligned=True),
            i64("ignore_index"),
            f32("smoothing"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"], "I": ["i32", "i64"], "L": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows")],
        grid=["n_rows", "1", "1"],
        # blocks of 2048 with 4 warps: more rows in flight per SM than 4096 with 8 (2.5 against 2.0 TB/s at
        # 4096 x 4096, 2.8 against 2.6 at 4096 x 32000, bf16, H100: benchmarks/experiments/row_reductions.py)
        configs=[Config({"BLOCK_N": 2048}, num_warps=4)],
        combos=per_row_dtypes,
    ),
    Kernel(
        fn=loss_reduce_kernel,
        op="cross_entropy",
        args=[
            ptr("Loss", "fp32", aligned=False),
            ptr("Target", "I", aligned=False),
            ptr("Out", "T", aligned=False),
            i64("n_rows"),
            i64("ignore_index"),
            i32("mean"),
        ],
        keys={"I": ["i32", "i64"], "T": ["fp16", "bf16", "fp32"]},
        grid=["1", "1", "1"],
        # 4096 rows per block: each block is one more round trip to memory (cross_entropy(mean), bf16 4096 x 4096
        # on the H100: 2.25 TB/s with blocks of 1024 and 4 warps, 2.34 with this; "none" runs at 2.80)
        configs=[Config({"BLOCK": 4096}, num_warps=8)],
    ),
]
