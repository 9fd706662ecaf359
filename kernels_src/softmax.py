"""The softmax family over the last dim (softmax, log_softmax, logsumexp), any length: rows up to 8192 are held
whole in registers (softmax and log_softmax also 16385-32768, LONG_ROW_CONFIGS); longer rows take two passes (an
online max and sum over blocks, then the normalized write), in steps that grow with the row. On Hopper, softmax and
log_softmax over at least four rows per multiprocessor hold rows of 8193 to 131072 16-bit elements (65536 float32)
in shared memory instead (softmax_held_kernel, _softmax_held.py), and rows past 224 KB, up to 262144 16-bit elements
(131072 float32), in the shared memory of a cluster of programs (softmax_cluster_kernel, _softmax_cluster.py);
their configs' `when` chooses.
logsumexp (LSE) is a variant of its own, with no run-time mode: it only reads, and with the mode's branches the same
config read at 2.1 TB/s against 2.9 without (4096 x 4096, bf16, H100). Rows of 4096 and 8192 take half the warps of
the norms' configs: more rows in flight per SM (logsumexp 3.4 against 2.9 TB/s at 4096 columns; softmax 3.0 against
2.7 at 8192; benchmarks/experiments/row_reductions.py)."""

import triton
import triton.language as tl

from aot.spec import ALIGNED_ONLY, Config, Kernel, Target, i32, i64, is_hopper, ptr
from kernels_src._lse import LOG2E, exp2_ftz, online_lse_step
from kernels_src._pdl import wait_for_predecessor
from kernels_src._rows import ELEMENT_BYTES, LONG_LOOP_CONFIGS, row_configs
from kernels_src._softmax_cluster import softmax_cluster_kernel
from kernels_src._softmax_held import softmax_held_kernel

SOFTMAX_ROW_BLOCKS = [(256, 2), (1024, 4), (4096, 4), (8192, 8)]  # (BLOCK_N, num_warps)


@triton.jit
def softmax_kernel(
    X, Y, stride_x, stride_y, n_cols, mode, BLOCK_N: tl.constexpr, LOOP: tl.constexpr, LSE: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    """mode 0: softmax, 1: log_softmax (rows of Y like X's), 2: logsumexp (LSE: one value per row at Y + row;
    stride_y is 0 there, so that the variants hinted for 16-aligned strides apply). A row of -inf gives logsumexp
    -inf and NaN softmax / log_softmax, as torch does."""
    wait_for_predecessor(PDL)
    row = tl.program_id(0).to(tl.int64)
    X += row * stride_x
    if LSE:
        Y += row
    else:
        Y += row * stride_y
    cols = tl.arange(0, BLOCK_N)
    if not LOOP:
        mask = cols < n_cols
        x = tl.load(X + cols, mask=mask, other=-float("inf")).to(tl.float32)
        row_max = tl.max(x, axis=0)
        safe = tl.where(row_max == -float("inf"), 0.0, row_max)
        if LSE:
            total = tl.sum(exp2_ftz((x - safe) * LOG2E), axis=0)
            tl.store(Y, (safe + tl.log(total)).to(Y.dtype.element_ty))
        else:
            e = exp2_ftz((x - safe) * LOG2E)
            total = tl.sum(e, axis=0)
            if mode == 0:
                tl.store(Y + cols, (e * (1.0 / total)).to(Y.dtype.element_ty), mask=mask)
            else:
                tl.store(Y + cols, (x - safe - tl.log(total)).to(Y.dtype.element_ty), mask=mask)
    else:
        # Each pass loads a step ahead of the step it works on, so two steps of the row are in flight: Triton does
        # not pipeline these loops (num_stages changes nothing). H100, bf16, in the wheel (wheel_ab.py vocab_rows,
        # h100-2026-11-24-experiments.md, stop 23), softmax / log_softmax / logsumexp TB/s: 4096 x 50304 2.36-2.44 /
        # 2.63 / 2.84 -> 2.62 / 2.79 / 2.96, 1024 x 128256 2.32 / 2.40 / 2.63 -> 2.55 / 2.67 / 2.92. The row norms'
        # loops lost with it (layer_norm at 1024 x 131072 1.83 -> 1.18) and keep one block in flight.
        m = -float("inf")
        s = tl.zeros([BLOCK_N], dtype=tl.float32)
        x_next = tl.load(X + cols, mask=cols < n_cols, other=-float("inf"))
        for start in range(0, n_cols, BLOCK_N):
            x = x_next
            ahead = start + BLOCK_N + cols
            x_next = tl.load(X + ahead, mask=ahead < n_cols, other=-float("inf"))
            m, s = online_lse_step(m, s, x.to(tl.float32))
        safe = tl.where(m == -float("inf"), 0.0, m)
        total = tl.sum(s, axis=0)
        if LSE:
            tl.store(Y, (safe + tl.log(total)).to(Y.dtype.element_ty))
        else:
            log_total = tl.log(total)
            scale = 1.0 / total
            shift = safe * LOG2E
            # the row's last reads and its writes evict first, keeping the rest of the row in L2 for this pass:
            # H100, bf16, 4096 x 32000 softmax 1.99 -> 2.51 TB/s (benchmarks/experiments/loop_eviction.py)
            x_next = tl.load(X + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
            for start in range(0, n_cols, BLOCK_N):
                x = x_next.to(tl.float32)
                ahead = start + BLOCK_N + cols
                x_next = tl.load(X + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
                c = start + cols
                if mode == 0:
                    y = exp2_ftz(x * LOG2E - shift) * scale
                else:
                    y = x - safe - log_total
                tl.store(Y + c, y.to(Y.dtype.element_ty), mask=c < n_cols, eviction_policy="evict_first")


# Rows past 16384 (the writing kinds; logsumexp reads its row once and keeps the shared configs): held whole up to
# 32768 (32 warps), then looping in steps that grow with the row: 8192 (16 warps) below 73728 columns, 16384 (32
# warps) from there; 8192 won at 65536 columns and 16384 at 81920, so the boundary lies between. A looping row reads
# x twice; longer steps with more warps keep fewer rows in flight, which likely lets the second read find more of
# its row in L2 (not measured directly). H100, bf16, in the wheel (wheel_ab.py long_rows and vocab_rows;
# h100-2026-11-23-experiments.md, h100-2026-11-24-experiments.md), softmax / log_softmax TB/s:
#   4096 x 32000   2.19-2.21 / 2.31 -> 2.67-2.69 / 2.72 (held whole)
#   2048 x 65536   1.85 / 1.91 -> 2.25 / 2.37
#   2048 x 81920   1.84 / 1.90 -> 2.21 / 2.29
#   1024 x 128256  1.77 / 1.82 -> 2.23 / 2.29
#   1024 x 131072  1.78 / 1.83 -> 2.25 / 2.31
# Steps of 8192 with 8 warps lost at 65536, steps of 16384 lost at 50304 (1.72 against 2.00 with 4096), and rows of
# 8193-16384 held whole ran at 1.8-2.2 against 2.4-2.7. One exp per element in the first pass since (_lse.py):
# 2048 x 65536 2.52 / 2.62, 1024 x 128256 2.32 / 2.40, 4096 x 16384 (steps of 4096) 2.44 / 2.61 -> 2.77 / 2.86.
LONG_ROW_CONFIGS = [
    Config({"BLOCK_N": 32768, "LOOP": False}, num_warps=32, when="n_cols > 16384 && n_cols <= 32768", fallback=False),
    *LONG_LOOP_CONFIGS,
]


def softmax_configs(target, keys) -> list[Config]:
    """The rows' configs, with LONG_ROW_CONFIGS for softmax and log_softmax."""
    return row_configs(blocks=SOFTMAX_ROW_BLOCKS, longer=() if keys["LSE"] else LONG_ROW_CONFIGS)


REGISTER_ROW = SOFTMAX_ROW_BLOCKS[-1][0]  # longer rows may take the Hopper kernels (LONG_ROW_CONFIGS' aside)

# Where the Hopper kernels read faster than softmax_kernel's loop, by rows per multiprocessor (H100, bf16, softmax /
# log_softmax TB/s). With fewer than HELD_ROWS_PER_SM, the held kernel's programs load, reduce and store in lockstep
# with nothing to overlap: 132 x 100000 1.92 against the loop's 2.49, 264 x 50304 2.27 against 2.69; 528 rows of
# either length gained 1-7% (h100-2026-11-26-experiments.md, stop 31). Its tail in registers lost at 528 rows of
# 128256 (2.46 / 2.57 -> 2.11-2.22 / 2.33-2.35) and gained 2-4% from 1056 (softmax_tail_rows.py, stop 31); clusters
# of 4 read those rows faster from CLUSTER_ROWS_PER_SM up to TAIL_ROWS_PER_SM (1024 rows: 2.65 / 2.66 -> 2.74 / 2.81;
# 132 rows: the loop's 2.50 against 2.18; 2112 rows: the tail as fast, 2.82). Rows past the tail's reach take
# clusters of 8 from one row per multiprocessor where each share holds at least CLUSTER_SHARE_BYTES (bf16 x 256000:
# 2.06-2.19 -> 2.44-2.82; float32 512 x 131072: 2.19 -> 2.83); shares of 35 KB (bf16 x 140000) read 10-17% below
# the loop (h100-2026-11-27-experiments.md, stop 40). csrc/ops/softmax.c tries the clusters, then the held kernel,
# the first config whose `when` holds taken.
HELD_ROWS_PER_SM = 4
TAIL_ROWS_PER_SM = 16
CLUSTER_ROWS_PER_SM = 4
CLUSTER_SHARE_BYTES = 48 * 1024
HELD_BYTES = 224 * 1024  # one program's rows; past them, a cluster's shares
PAST_REGISTERS = f"n_cols > {REGISTER_ROW} && "  # the held configs' first condition (the clusters' rows are longer)


def held_configs(target: Target, keys) -> list[Config]:
    """softmax_held_kernel: rows of up to 32 KB six programs to a multiprocessor, 64 KB three, 112 KB two and 224 KB
    one, then 224 KB with two more 16-byte vectors per thread in registers (16-bit rows of up to 131072 elements,
    float32 of up to 65536); a step is one 16-byte vector per thread. Only rows past REGISTER_ROW come here (float32
    has no 32 KB config), from HELD_ROWS_PER_SM rows per multiprocessor, the tail from TAIL_ROWS_PER_SM. x is read
    once, where the loop reads it twice: H100, bf16, softmax 4096 x 8208 2.32 -> 2.80 TB/s, 4096 x 32000 2.56-2.68 ->
    2.92, 1024 x 100000 2.35 -> 2.74 (h100-2026-11-26-experiments.md, stop 31)."""
    size = ELEMENT_BYTES[keys["T"]]
    configs = []
    for kb, per_sm, warps in ((32, 6, 8), (64, 3, 16), (112, 2, 16), (224, 1, 32)):
        held = kb * 1024 // size
        if held > REGISTER_ROW:
            when = f"{PAST_REGISTERS}n_cols <= {held} && n_rows >= {HELD_ROWS_PER_SM} * NUM_SMS"
            configs.append(Config({"HELD": held, "PER_SM": per_sm}, num_warps=warps, num_stages=1, when=when))
    held, tail = HELD_BYTES // size, 2 * 16 * 32 * 32 // size
    when = f"{PAST_REGISTERS}n_cols <= {held + tail} && n_rows >= {TAIL_ROWS_PER_SM} * NUM_SMS"
    configs.append(Config({"HELD": held, "PER_SM": 1, "TAIL": tail}, num_warps=32, num_stages=1, when=when))
    return configs


def cluster_configs(target: Target, keys) -> list[Config]:
    """softmax_cluster_kernel: clusters of 4 and 8 programs per row, each holding a share of up to 64 KB (three
    programs to a multiprocessor): 16-bit rows of up to 131072 and 262144 elements, float32 of up to 65536 and
    131072, only past the held kernel's HELD_BYTES (rows that fit one program read slower in clusters: bf16 4096 x
    32000 2.96 -> 1.66 TB/s, h100-2026-11-27-experiments.md, stop 40), and over the rows per multiprocessor above."""
    size = ELEMENT_BYTES[keys["T"]]
    held = 64 * 1024 // size
    rows = {
        4: f"n_cols > {HELD_BYTES // size} && n_rows >= {CLUSTER_ROWS_PER_SM} * NUM_SMS && "
        f"n_rows < {TAIL_ROWS_PER_SM} * NUM_SMS",
        8: f"n_cols >= {8 * CLUSTER_SHARE_BYTES // size} && n_rows >= NUM_SMS",
    }
    return [
        Config(
            {"HELD": held, "PER_SM": 3, "CLUSTER": c},
            num_warps=16,
            num_stages=1,
            cluster=c,
            when=f"{rows[c]} && n_cols <= {held * c}",
        )
        for c in (4, 8)
    ]


# What the kernels take: a program per row of x (at X + row * stride_x) and of the output (at Y + row * stride_y).
ROW_LAUNCH = dict(
    args=[
        ptr("X", "T"),
        ptr("Y", "T"),
        i64("stride_x", aligned=True),
        i64("stride_y", aligned=True),
        i32("n_cols", aligned=True),
        i32("mode"),
    ],
    grid_args=[i64("n_rows")],
    grid=["n_rows", "1", "1"],
)

# Hopper's kernels that hold rows in shared memory: softmax and log_softmax (the run-time mode), rows whose length
# and strides are whole 16-byte vectors
HOPPER_ROWS = dict(
    op="softmax", keys={"T": ["fp16", "bf16", "fp32"]}, aligned=ALIGNED_ONLY, targets=is_hopper, **ROW_LAUNCH
)

KERNELS = [
    Kernel(
        fn=softmax_kernel,
        op="softmax",
        keys={"T": ["fp16", "bf16", "fp32"], "LSE": [False, True]},
        configs=softmax_configs,
        exports={"REGISTER_ROW": REGISTER_ROW},  # C's shortcut past the Hopper kernels' selection on shorter rows
        **ROW_LAUNCH,
    ),
    Kernel(fn=softmax_held_kernel, configs=held_configs, **HOPPER_ROWS),
    Kernel(fn=softmax_cluster_kernel, configs=cluster_configs, **HOPPER_ROWS),
]
