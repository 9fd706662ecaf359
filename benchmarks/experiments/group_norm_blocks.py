"""group_norm's block per program step, through Triton's JIT as the wheel launches it (only the hinted integers
specialized; the writing pass's eviction hints where the wheel sets them, steps of GROUP_EVICT_FIRST_BLOCK): the
shipped looping kernels at several (BLOCK_N, num_warps), with the C side's split count, and groups of up to 32768
elements held whole in registers (one read of x), TB/s counting x read and y written once, in one run with torch
eager, torch.compile and the copy bandwidth. Each variant's output is checked against float64.

    python3 benchmarks/experiments/group_norm_blocks.py [more] [few]

`more`: long groups that run unsplit (at least 2 per multiprocessor), by group length and count. `few`: only the
looping steps the wheel compiles (4096 / 8 warps, 8192 and 16384 / 16 warps).
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.norm import GROUP_EVICT_FIRST_BLOCK, group_norm_kernel, group_norm_stats_kernel  # noqa: E402

UNHINTED = ["spatial", "channels_per_group", "groups", "has_weight", "has_bias"]
NORMALIZE = triton.jit(group_norm_kernel.fn, do_not_specialize=UNHINTED)
SHAPES = [((16, 256, 64, 64), 32), ((2, 512, 128, 128), 32), ((8, 320, 64, 64), 32), ((32, 128, 64, 64), 32),
          ((4, 128, 256, 256), 32)]  # fmt: skip
# (BLOCK_N, num_warps, whole): whole = the group held in registers (LOOP=False), where it fits
VARIANTS = [(4096, 8, False), (8192, 8, False), (8192, 16, False), (16384, 16, False), (2048, 4, False),
            (16384, 16, True), (32768, 16, True), (32768, 32, True)]  # fmt: skip
MORE_SHAPES = [((16, 128, 64, 64), 32), ((32, 128, 64, 64), 32), ((9, 256, 64, 64), 32), ((12, 256, 64, 64), 32),
               ((16, 256, 64, 64), 32), ((32, 256, 64, 64), 32), ((64, 256, 64, 64), 32), ((16, 512, 64, 64), 32),
               ((32, 512, 64, 64), 32), ((16, 256, 128, 128), 32)]  # fmt: skip
MORE_VARIANTS = [(4096, 8, False), (4096, 4, False), (4096, 16, False), (8192, 8, False), (8192, 16, False),
                 (16384, 16, False), (16384, 32, False)]  # fmt: skip
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def launch(x, w, b, y, partials, groups: int, block: int, warps: int, whole: bool) -> int:
    rows = x.shape[0] * groups
    cpg, spatial = x.shape[1] // groups, x[0, 0].numel()
    n = cpg * spatial
    if whole:
        NORMALIZE[(rows, 1)](x, w, b, y, x, n, block, spatial, cpg, groups, 1e-5, 1, 1, BLOCK_N=block, LOOP=False,
                             EVICT_FIRST=False, num_warps=warps)  # fmt: skip
        return 1
    splits = 1 if rows >= 2 * SMS else min(64, cdiv(4 * SMS, rows))  # csrc/ops/norm.c's group_splits
    chunk = cdiv(n if splits == 1 else cdiv(n, splits), block) * block
    used = cdiv(n, chunk)
    if used > 1:
        group_norm_stats_kernel[(rows, used)](x, partials, n, chunk, BLOCK_N=block, num_warps=warps)
    NORMALIZE[(rows, used)](x, w, b, y, partials, n, chunk, spatial, cpg, groups, 1e-5, 1, 1, BLOCK_N=block,
                            LOOP=True, EVICT_FIRST=block == GROUP_EVICT_FIRST_BLOCK, num_warps=warps)  # fmt: skip
    return used


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s, {SMS} SMs")
    variants = MORE_VARIANTS if "more" in sys.argv else VARIANTS
    if "few" in sys.argv:
        variants = [(4096, 8, False), (8192, 16, False), (16384, 16, False)]
    names = [f"{bn}/{nw}{' whole' if whole else ''}" for bn, nw, whole in variants]
    print("shape / groups", "n x rows", "eager", "compile", *names, sep="\t")
    for shape, groups in MORE_SHAPES if "more" in sys.argv else SHAPES:
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 2 + 3
        w, b = (torch.randn(shape[1], device="cuda", dtype=torch.bfloat16) for _ in range(2))
        y = torch.empty_like(x)
        partials = torch.empty(shape[0] * groups * 64 * 2, device="cuda", dtype=torch.float32)
        nbytes = 2 * x.numel() * 2
        n = x[0].numel() // groups
        want = F.group_norm(x.double(), groups, w.double(), b.double())
        compiled = torch.compile(lambda x: F.group_norm(x, groups, w, b))
        cells = [nbytes / bench_queued(fn) / 1e9 for fn in (lambda: F.group_norm(x, groups, w, b), lambda: compiled(x))]
        cells = [f"{c:.2f}" for c in cells]
        for block, warps, whole in variants:
            if whole and n > block:
                cells.append("-")
                continue
            y.fill_(float("nan"))
            used = launch(x, w, b, y, partials, groups, block, warps, whole)
            err = (y.double() - want).abs().max().item()
            assert err < 0.1, (shape, block, warps, whole, err)
            ms = bench_queued(lambda v=(block, warps, whole): launch(x, w, b, y, partials, groups, *v))
            cells.append(f"{nbytes / ms / 1e9:.2f} ({used})")
        print(f"{shape} / {groups}", f"{n} x {shape[0] * groups}", *cells, sep="\t", flush=True)


if __name__ == "__main__":
    main()
