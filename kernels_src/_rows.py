"""What the row-wise kernels (norms, softmax) share: where a program's rows start (norm_rows, for row_norm_kernel and
Hopper's row_norm_held_kernel alike), and their configs: a row up to 8192 elements is held whole in registers,
the smallest block that fits it is chosen at run time; longer rows loop over blocks of 4096 (the group norm and the
softmax family pass configs of their own for longer rows: `longer`). Rows whose length or stride misses the
alignment hints (rare: a hidden size that is not a multiple of 8) all take the looping config's unhinted variant,
which takes any length."""

from collections.abc import Sequence

import triton
import triton.language as tl

from aot.spec import Config

ROW_BLOCKS = [(256, 2), (1024, 4), (4096, 8), (8192, 16)]  # (BLOCK_N, num_warps)
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}  # per dtype key, for configs sized in bytes of shared memory
LOOP_BLOCK = 4096


def row_configs(
    length: str = "n_cols",
    blocks: list[tuple[int, int]] = ROW_BLOCKS,
    longer: Sequence[Config] = (),
    loop_hinted: bool = True,
) -> list[Config]:
    """`length` names the kernel's integer argument holding the row length; `blocks` the (BLOCK_N, num_warps) pairs
    of the rows held whole; `longer` a kernel's own configs for longer rows, tried before the looping fallback;
    `loop_hinted=False` when `longer` leaves no hinted row to the fallback (it then compiles its unhinted variant
    only)."""
    configs = [
        Config({"BLOCK_N": b, "LOOP": False}, num_warps=w, when=f"{length} <= {b}", fallback=False) for b, w in blocks
    ]
    return configs + list(longer) + [Config({"BLOCK_N": LOOP_BLOCK, "LOOP": True}, num_warps=8, hinted=loop_hinted)]


# Rows past 32768 elements that loop (the softmax family's writing kinds and the row norms): steps that grow with the
# row, 8192 (16 warps) below 73728 elements and 16384 (32 warps) from there; the measurements are in softmax.py and
# norm.py.
LONG_LOOP_CONFIGS = [
    Config({"BLOCK_N": 8192, "LOOP": True}, num_warps=16, when="n_cols > 32768 && n_cols < 73728", fallback=False),
    Config({"BLOCK_N": 16384, "LOOP": True}, num_warps=32, when="n_cols >= 73728", fallback=False),
]


@triton.jit
def norm_rows(X, R, G, Y, H, stride_x, stride_r, stride_g, stride_y, stride_h, HAS_RESIDUAL: tl.constexpr,
              HAS_GATE: tl.constexpr, CLUSTER: tl.constexpr = 1):  # fmt: skip
    """The starts of this program's row (program_id(0), or with CLUSTER programs to a row its cluster's) of x, the
    residual, the gate and the outputs (a norm's pointers; those its variant has no use for are left as they are)."""
    row = tl.program_id(0).to(tl.int64)
    if CLUSTER > 1:
        row = row // CLUSTER
    X += row * stride_x
    Y += row * stride_y
    if HAS_RESIDUAL:
        R += row * stride_r
        H += row * stride_h
    if HAS_GATE:
        G += row * stride_g
    return X, R, G, Y, H
