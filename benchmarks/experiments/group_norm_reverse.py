"""group_norm's two-read paths with their second read of x walked in reverse, through Triton's JIT as the wheel
launches them (only n_elems and chunk specialized): the split path's normalizing launch taking groups and chunks
from the last to the first (the stats launch read the last ones most recently, so they are likelier still in L2),
and an unsplit program's second pass taking its steps from the group's end. The shipped loop (kernels_src/norm.py
group_norm_kernel, LOOP=True, from its helpers) with the two switches; TB/s counting x read and y written once,
in one run with torch eager and the copy bandwidth; every result is checked against float64 first.

    python3 benchmarks/experiments/group_norm_reverse.py
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from group_norm_split import operands  # noqa: E402
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.norm import _group_moments, _write_step, group_norm_stats_kernel  # noqa: E402

SMS = torch.cuda.get_device_properties(0).multi_processor_count


@triton.jit
def _write_steps(X, Y, W, B, start, end, shift, mean_shifted, rstd, first_channel, spatial, has_weight, has_bias,
                 BLOCK_N: tl.constexpr, EVICTION: tl.constexpr, REVERSE: tl.constexpr):  # fmt: skip
    cols = tl.arange(0, BLOCK_N)
    steps = tl.cdiv(end - start, BLOCK_N)
    for i in range(0, steps):
        step = steps - 1 - i if REVERSE else i
        _write_step(X, Y, W, B, start + step * BLOCK_N + cols, end, shift, mean_shifted, rstd, first_channel, spatial,
                    has_weight, has_bias, EVICTION)  # fmt: skip


@triton.jit(do_not_specialize=["spatial", "channels_per_group", "groups", "has_weight", "has_bias"])
def loop_kernel(X, W, B, Y, Partials, n_elems, chunk, spatial, channels_per_group, groups, eps, has_weight, has_bias,
                BLOCK_N: tl.constexpr, EVICT_FIRST: tl.constexpr, REVERSE_ROWS: tl.constexpr,
                REVERSE_STEPS: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    split = tl.program_id(1)
    splits = tl.num_programs(1)
    if REVERSE_ROWS:
        pid = tl.num_programs(0) - 1 - pid
        split = splits - 1 - split
    row = pid.to(tl.int64)
    first_channel = (pid % groups) * channels_per_group
    X += row * n_elems
    Y += row * n_elems
    n = n_elems.to(tl.int32)
    shift, mean_shifted, rstd = _group_moments(X, Partials, row, n, splits, eps, BLOCK_N)
    start = split * chunk
    end = start + tl.minimum(chunk, n - start)
    if spatial % 16 == 0:
        _write_steps(X, Y, W, B, start, end, shift, mean_shifted, rstd, first_channel, (spatial // 16) * 16,
                     has_weight, has_bias, BLOCK_N, "evict_first" if EVICT_FIRST else "", REVERSE_STEPS)  # fmt: skip
    else:
        _write_steps(X, Y, W, B, start, end, shift, mean_shifted, rstd, first_channel, spatial, has_weight,
                     has_bias, BLOCK_N, "evict_first" if EVICT_FIRST else "", REVERSE_STEPS)  # fmt: skip


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def plan(rows: int, n: int):
    """csrc/ops/norm.c's choice: (splits, chunk, BLOCK_N, warps, EVICT_FIRST)."""
    if rows < 2 * SMS:
        want = min(64, cdiv(4 * SMS, rows))
        chunk = cdiv(cdiv(n, want), 4096) * 4096
        return cdiv(n, chunk), chunk, 4096, 8, True
    chunk = cdiv(n, 4096) * 4096
    per_sm = rows // SMS
    for block in (16384, 8192):
        if per_sm >= 3 and n >= 4 * block:
            return 1, chunk, block, 16, False
    return 1, chunk, 4096, 8, True


def launch(x, w, b, y, partials, groups, reverse_rows, reverse_steps):
    rows = x.shape[0] * groups
    cpg, spatial = x.shape[1] // groups, x[0, 0].numel()
    n = cpg * spatial
    splits, chunk, block, warps, evict = plan(rows, n)
    if splits > 1:
        group_norm_stats_kernel[(rows, splits)](x, partials, n, chunk, BLOCK_N=4096, num_warps=8)
    loop_kernel[(rows, splits)](x, w, b, y, partials, n, chunk, spatial, cpg, groups, 1e-5, 1, 1, BLOCK_N=block,
                                EVICT_FIRST=evict, REVERSE_ROWS=reverse_rows, REVERSE_STEPS=reverse_steps,
                                num_warps=warps)  # fmt: skip


SHAPES = [((2, 512, 128, 128), 32), ((4, 512, 128, 128), 32), ((8, 320, 64, 64), 32), ((16, 256, 64, 64), 32),
          ((32, 256, 64, 64), 32), ((16, 512, 64, 64), 32), ((1, 512, 128, 128), 32)]  # fmt: skip
VARIANTS = [(False, False), (True, False), (False, True), (True, True)]


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s, {SMS} SMs")
    print("shape / groups", "n", "splits", "eager", *[f"rows {r} steps {s}" for r, s in VARIANTS], sep="\t")
    for shape, groups in SHAPES:
        x, w, b, y, partials, nbytes, want = operands(shape, groups)
        n = x[0].numel() // groups
        cells = [n, plan(shape[0] * groups, n)[0]]
        cells.append(f"{nbytes / bench_queued(lambda: F.group_norm(x, groups, w, b)) / 1e9:.2f}")
        for rr, rs in VARIANTS:
            y.fill_(float("nan"))
            launch(x, w, b, y, partials, groups, rr, rs)
            err = (y.double() - want).abs().max().item()
            assert err < 0.1, (shape, rr, rs, err)
            ms = bench_queued(lambda rr=rr, rs=rs: launch(x, w, b, y, partials, groups, rr, rs))
            cells.append(f"{nbytes / ms / 1e9:.2f}")
        print(f"{shape} / {groups}", *cells, sep="\t", flush=True)


if __name__ == "__main__":
    main()
