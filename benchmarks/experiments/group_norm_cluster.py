"""group_norm's groups of 8193-262144 elements read once by a thread-block cluster (group_norm_cluster_kernel)
against the two-read paths (one program per group, or a split group's two launches), each cluster config in turn.
Needs a wheel built with benchmarks/experiments/group_norm_cluster.diff applied to 1951667 (the kernel, clusters in
aot/, and a hook in csrc/ops/norm.c): XOPSAOT_GN_CHOICE picks config i of its EXP list (-1: the patch's default
list, -2: no cluster, the shipped paths). Checks every result against float64 on the CPU
(outputs poisoned first), then times (TB/s counting x read and y written once) with torch eager and the copy
bandwidth in the same run.

    python3 benchmarks/experiments/group_norm_cluster.py [check|time|both]
"""

import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402

# (CLUSTER, BLOCK_N, num_warps) of the choice hook's EXP list, in order
EXP = [(1, 32768, 32), (1, 16384, 16), (4, 4096, 8), (8, 4096, 8), (2, 16384, 16), (4, 8192, 16), (8, 8192, 16),
       (8, 16384, 32), (8, 32768, 32), (16, 16384, 32), (16, 16384, 16), (8, 8192, 8), (8, 16384, 16),
       (16, 8192, 16), (16, 8192, 8), (4, 8192, 8)]  # fmt: skip
SHAPES = [((16, 256, 64, 64), 32), ((2, 512, 128, 128), 32), ((1, 512, 128, 128), 32), ((32, 256, 64, 64), 32),
          ((2, 320, 64, 64), 32), ((2, 640, 32, 32), 32), ((8, 1280, 16, 16), 32), ((4, 128, 128, 128), 32),
          ((1, 128, 256, 256), 32), ((8, 320, 64, 64), 32)]  # fmt: skip
CHECKS = SHAPES[:3] + [((2, 60, 55, 48), 6), ((2, 128, 45, 45), 8), ((3, 16, 1, 8208), 2)]


def choose(i: int) -> None:
    os.environ["XOPSAOT_GN_CHOICE"] = str(i)


def fits(i: int, n: int, timing: bool = False) -> bool:
    """Config i holds a group of n; when timing, one with four times that capacity or more is left out."""
    return i < 0 or n <= EXP[i][0] * EXP[i][1] < (4 * n if timing else 1 << 40)


def reference(x, groups, w, b):
    x64 = x.double().cpu()
    return F.group_norm(x64, groups, w.double().cpu(), b.double().cpu(), 1e-5)


def check() -> None:
    bad = 0
    for dtype, tol in ((torch.bfloat16, 2e-2), (torch.float32, 1e-4)):
        for shape, groups in CHECKS:
            x = torch.randn(*shape, device="cuda", dtype=dtype) * 3 + 1
            w, b = (torch.randn(shape[1], device="cuda", dtype=dtype) for _ in range(2))
            want = reference(x, groups, w, b)
            n = x[0].numel() // groups
            for i in [-2, -1] + list(range(len(EXP))):
                if not fits(i, n):
                    continue
                choose(i)
                torch.full((x.numel() * 2,), float("nan"), device="cuda", dtype=dtype)  # poison the pool
                y = xopsaot.group_norm(x, groups, w, b)
                err = ((y.double().cpu() - want).abs() / (1 + want.abs())).max().item()
                if not err <= tol:
                    bad += 1
                    print(f"FAIL {dtype} {shape}/{groups} choice {i}: {err:.2e}")
    print(f"check: {bad} failures")


def time_all() -> None:
    warm_up_gpu()
    copy = copy_bandwidth()
    print(f"copy {copy:.2f} TB/s")
    head = ["shape/groups", "n", "eager", "two reads", "default"] + [f"{c}x{b}/{w}" for c, b, w in EXP]
    print(" | ".join(head))
    for shape, groups in SHAPES:
        x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
        w, b = (torch.randn(shape[1], device="cuda", dtype=torch.bfloat16) for _ in range(2))
        n = x[0].numel() // groups
        nbytes = 2 * x.numel() * 2
        eager = nbytes / bench_queued(lambda: F.group_norm(x, groups, w, b)) / 1e9
        cells = [f"{shape}/{groups}", str(n), f"{eager:.2f}"]
        for i in [-2, -1] + list(range(len(EXP))):
            if not fits(i, n, timing=True):
                cells.append("-")
                continue
            choose(i)
            cells.append(f"{nbytes / bench_queued(lambda: xopsaot.group_norm(x, groups, w, b)) / 1e9:.2f}")
        print(" | ".join(cells), flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "both"
    if what in ("check", "both"):
        check()
    if what in ("time", "both"):
        time_all()
