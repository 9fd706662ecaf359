"""group_norm's looping write with the weight and bias taken once per step. A step of BLOCK_N elements within a
group whose spatial size is at least BLOCK_N spans at most two channels, so its channel is one scalar division and
its weight and bias two scalar loads each, where the shipped _write_step divides and gathers per element. Through
Triton's JIT as the wheel launches it (only n_elems and chunk specialized), the split path (the shipped sums launch,
then the writing one) and the unsplit loop, against the shipped kernels, the same without weight and bias (a
bound), the wheel and torch eager in one run; TB/s counting x read and y written once; every result checked against
float64 first (outputs poisoned).

    python3 benchmarks/experiments/group_norm_channel_steps.py
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
from group_norm_split import CHUNK, SMS, cdiv, round_up  # noqa: E402
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.norm import _group_moments, _write_step, group_norm_stats_kernel  # noqa: E402

UNHINTED = ["spatial", "channels_per_group", "groups", "has_weight", "has_bias"]


@triton.jit
def _write_step_scalar_channels(X, Y, W, B, s, cols, end, shift, mean_shifted, rstd, first_channel, spatial,
                                has_weight, has_bias, EVICTION: tl.constexpr):  # fmt: skip
    block: tl.constexpr = cols.shape[0]
    c = s + cols
    mask = c < end
    x = tl.load(X + c, mask=mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    x_hat = (x - shift - mean_shifted) * rstd
    k = s // spatial
    boundary = (k + 1) * spatial
    channel = first_channel + k
    crosses = (s + block > boundary) & (boundary < end)
    w0 = tl.load(W + channel, mask=has_weight != 0, other=1.0).to(tl.float32)
    w1 = tl.load(W + channel + 1, mask=(has_weight != 0) & crosses, other=1.0).to(tl.float32)
    b0 = tl.load(B + channel, mask=has_bias != 0, other=0.0).to(tl.float32)
    b1 = tl.load(B + channel + 1, mask=(has_bias != 0) & crosses, other=0.0).to(tl.float32)
    second = c >= boundary
    y = x_hat * tl.where(second, w1, w0) + tl.where(second, b1, b0)
    tl.store(Y + c, y.to(Y.dtype.element_ty), mask=mask, eviction_policy=EVICTION)


@triton.jit(do_not_specialize=UNHINTED)
def write_kernel(X, W, B, Y, Partials, n_elems, chunk, spatial, channels_per_group, groups, eps, has_weight,
                 has_bias, BLOCK_N: tl.constexpr, SCALAR_CHANNELS: tl.constexpr):  # fmt: skip
    """group_norm_kernel's LOOP branch (forward steps unsplit, backward split, as shipped) with the step switch."""
    row = tl.program_id(0).to(tl.int64)
    first_channel = (tl.program_id(0) % groups) * channels_per_group
    X += row * n_elems
    Y += row * n_elems
    n = n_elems.to(tl.int32)
    split = tl.program_id(1)
    splits = tl.num_programs(1)
    shift, mean_shifted, rstd = _group_moments(X, Partials, row, n, splits, eps, BLOCK_N)
    start = split * chunk
    end = start + tl.minimum(chunk, n - start)
    cols = tl.arange(0, BLOCK_N)
    steps = tl.cdiv(end - start, BLOCK_N)
    eviction: tl.constexpr = "evict_first"
    for i in range(0, steps):
        s = start + (steps - 1 - i if splits > 1 else i) * BLOCK_N
        if SCALAR_CHANNELS and spatial >= BLOCK_N:
            _write_step_scalar_channels(X, Y, W, B, s, cols, end, shift, mean_shifted, rstd, first_channel, spatial,
                                        has_weight, has_bias, eviction)  # fmt: skip
        elif spatial % 16 == 0:
            _write_step(X, Y, W, B, s + cols, end, shift, mean_shifted, rstd, first_channel, (spatial // 16) * 16,
                        has_weight, has_bias, eviction)  # fmt: skip
        else:
            _write_step(X, Y, W, B, s + cols, end, shift, mean_shifted, rstd, first_channel, spatial, has_weight,
                        has_bias, eviction)  # fmt: skip


def splits_of(rows: int, n: int) -> tuple[int, int]:
    """csrc/ops/norm.c's group_splits: (splits, chunk)."""
    if rows >= 2 * SMS:
        return 1, round_up(n, CHUNK)
    splits = min(64, cdiv(4 * SMS, rows))
    chunk = round_up(cdiv(n, splits), CHUNK)
    return cdiv(n, chunk), chunk


SHAPES = [((2, 512, 128, 128), 32), ((1, 512, 128, 128), 32), ((4, 512, 128, 128), 32), ((2, 128, 256, 256), 32),
          ((8, 320, 64, 64), 32), ((12, 320, 64, 64), 32), ((16, 640, 64, 64), 32), ((4, 128, 128, 128), 32),
          ((32, 320, 64, 64), 32)]  # fmt: skip


def main() -> None:
    import xopsaot

    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s, {SMS} SMs, xopsaot {xopsaot.__file__}")
    print("shape / groups", "splits", "eager", "wheel", "shipped", "scalar channels", "shipped, no affine",
          "scalar, no affine", sep="\t")  # fmt: skip
    for shape, groups in SHAPES:
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 2 + 3
        w, b = (torch.randn(shape[1], device="cuda", dtype=torch.bfloat16) for _ in range(2))
        y = torch.empty_like(x)
        rows = shape[0] * groups
        cpg, spatial = shape[1] // groups, x[0, 0].numel()
        n = cpg * spatial
        splits, chunk = splits_of(rows, n)
        partials = torch.empty(rows * 64 * 2, device="cuda", dtype=torch.float32)
        nbytes = 2 * x.numel() * 2
        cells = [nbytes / bench_queued(lambda: F.group_norm(x, groups, w, b)) / 1e9]
        cells.append(nbytes / bench_queued(lambda: xopsaot.group_norm(x, groups, w, b)) / 1e9)
        for affine in (1, 0):
            want = F.group_norm(x.double(), groups, w.double() if affine else None, b.double() if affine else None)
            for scalar in (False, True):

                def launch(affine=affine, scalar=scalar):
                    if splits > 1:
                        group_norm_stats_kernel[(rows, splits)](x, partials, n, chunk, BLOCK_N=CHUNK, num_warps=8)
                    args = (x, w, b, y, partials, n, chunk, spatial, cpg, groups, 1e-5, affine, affine)
                    write_kernel[(rows, splits)](*args, BLOCK_N=CHUNK, SCALAR_CHANNELS=scalar, num_warps=8)

                y.fill_(float("nan"))
                launch()
                err = (y.double() - want).abs().max().item()
                assert err < 0.1, (shape, affine, scalar, err)
                cells.append(nbytes / bench_queued(launch) / 1e9)
        print(f"{shape} / {groups}", splits, *[f"{c:.2f}" for c in cells], sep="\t", flush=True)


if __name__ == "__main__":
    main()
