"""group_norm's long groups split over programs, through Triton's JIT: the shipped kernels (kernels_src/norm.py)
launched with 1 to 32 splits per group (1 = one program per group, both passes in it; more = the chunk-sums launch,
then the normalizing one), TB/s counting x read and y written once, in one run with torch eager and the copy
bandwidth. The C side (csrc/ops/norm.c) picks the split count from the programs it wants per SM; this sweep is what
that number rests on.

    python3 benchmarks/experiments/group_norm_split.py
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.norm import group_norm_kernel, group_norm_stats_kernel  # noqa: E402

# As the wheel launches them: only the integers it hints (n_elems, chunk: multiples of 16) specialized; the JIT
# would also fold has_weight = 1 into a constant and know spatial's divisibility. AS_AOT_SPATIAL: spatial hinted too.
UNHINTED = ["channels_per_group", "groups", "has_weight", "has_bias"]
AS_AOT = (group_norm_stats_kernel, triton.jit(group_norm_kernel.fn, do_not_specialize=["spatial", *UNHINTED]))
AS_AOT_SPATIAL = (group_norm_stats_kernel, triton.jit(group_norm_kernel.fn, do_not_specialize=UNHINTED))

CHUNK = 4096  # csrc/ops/norm.c's GROUP_CHUNK
SPLITS = [1, 2, 4, 8, 16, 32]
SHAPES = [((16, 256, 64, 64), 32), ((2, 512, 128, 128), 32), ((1, 512, 128, 128), 32), ((8, 320, 64, 64), 32),
          ((4, 128, 256, 256), 32)]  # fmt: skip
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def round_up(a: int, b: int) -> int:
    return cdiv(a, b) * b


def launch(x, w, b, y, partials, groups: int, splits: int, kernels=(group_norm_stats_kernel, group_norm_kernel)):
    rows = x.shape[0] * groups
    cpg, spatial = x.shape[1] // groups, x[0, 0].numel()
    n = cpg * spatial
    chunk = round_up(n if splits == 1 else cdiv(n, splits), CHUNK)
    used = cdiv(n, chunk)
    if used > 1:
        kernels[0][(rows, used)](x, partials, n, chunk, BLOCK_N=CHUNK, num_warps=8)
    kernels[1][(rows, used)](x, w, b, y, partials, n, chunk, spatial, cpg, groups, 1e-5, 1, 1, BLOCK_N=CHUNK,
                                    LOOP=True, EVICT_FIRST=True, num_warps=8)  # fmt: skip
    return used


def operands(shape, groups: int):
    """bf16 x (mean 3) with its weight and bias, an output, a partials workspace for up to 64 splits, the bytes
    counted (x read and y written once) and the float64 result."""
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 2 + 3
    w, b = (torch.randn(shape[1], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    y = torch.empty_like(x)
    partials = torch.empty(shape[0] * groups * 64 * 2, device="cuda", dtype=torch.float32)
    want = F.group_norm(x.double(), groups, w.double(), b.double())
    return x, w, b, y, partials, 2 * x.numel() * 2, want


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s, {SMS} SMs")
    print("shape / groups", "rows", "eager", *[f"splits {s}" for s in SPLITS], "C's rule: as aot", "spatial hinted",
          sep="\t")  # fmt: skip
    for shape, groups in SHAPES:
        x, w, b, y, partials, nbytes, want = operands(shape, groups)
        cells = [f"{nbytes / bench_queued(lambda: F.group_norm(x, groups, w, b)) / 1e9:.2f}"]
        for s in SPLITS:
            y.fill_(float("nan"))
            used = launch(x, w, b, y, partials, groups, s)
            err = (y.double() - want).abs().max().item()
            assert err < 0.1, (shape, s, err)
            ms = bench_queued(lambda s=s: launch(x, w, b, y, partials, groups, s))
            cells.append(f"{nbytes / ms / 1e9:.2f} ({used})")
        rows = shape[0] * groups
        rule = 1 if rows >= 2 * SMS else min(64, cdiv(4 * SMS, rows))  # csrc/ops/norm.c's group_splits
        for kernels in (AS_AOT, AS_AOT_SPATIAL):
            y.fill_(float("nan"))
            used = launch(x, w, b, y, partials, groups, rule, kernels)
            assert (y.double() - want).abs().max().item() < 0.1, (shape, "as aot")
            ms = bench_queued(lambda k=kernels: launch(x, w, b, y, partials, groups, rule, k))
            cells.append(f"{nbytes / ms / 1e9:.2f} ({used})")
        print(f"{shape} / {groups}", rows, *cells, sep="\t", flush=True)
    # groups held whole in registers: what the per-element channel division and weight / bias gathers cost
    print("\nwhole groups", "eager", "affine", "no affine", "affine as aot", "spatial hinted", sep="\t")
    for shape, groups in (
        ((64, 512, 16, 16), 32),
        ((32, 2048, 7, 7), 32),
        ((8, 128, 32, 32), 32),
        ((64, 320, 9, 9), 32),
    ):
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        w, b = (torch.randn(shape[1], device="cuda", dtype=torch.bfloat16) for _ in range(2))
        y = torch.empty_like(x)
        rows, cpg, spatial = shape[0] * groups, shape[1] // groups, x[0, 0].numel()
        n = cpg * spatial
        block, warps = next((bn, nw) for bn, nw in ((256, 2), (1024, 4), (4096, 8), (8192, 16)) if n <= bn)
        nbytes = 2 * x.numel() * 2
        cells = [nbytes / bench_queued(lambda: F.group_norm(x, groups, w, b)) / 1e9]
        for affine, kernel in ((1, group_norm_kernel), (0, group_norm_kernel), (1, AS_AOT[1]), (1, AS_AOT_SPATIAL[1])):
            args = (x, w, b, y, x, n, round_up(n, CHUNK), spatial, cpg, groups, 1e-5, affine, affine)
            options = {"BLOCK_N": block, "LOOP": False, "EVICT_FIRST": False, "num_warps": warps}
            fn = lambda k=kernel, args=args: k[(rows, 1)](*args, **options)  # noqa: E731
            y.fill_(float("nan"))
            fn()
            want = F.group_norm(x.double(), groups, w.double() if affine else None, b.double() if affine else None)
            assert (y.double() - want).abs().max().item() < 0.1, (shape, affine)
            cells.append(nbytes / bench_queued(fn) / 1e9)
        print(f"{shape} / {groups}", *[f"{c:.2f}" for c in cells], sep="\t", flush=True)


if __name__ == "__main__":
    main()
