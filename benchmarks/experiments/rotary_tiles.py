"""One-off: device time of rotary_kernel (out of place, bf16, 16384 tokens x 32 heads x 128) and lrpe_cosine_kernel
at several tile shapes, compiled by the device's Triton JIT from kernels_src, against the copy bandwidth.

    python benchmarks/experiments/rotary_tiles.py
"""

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.rotary import lrpe_cosine_kernel, rotary_kernel  # noqa: E402


def main() -> None:
    warm_up_gpu()
    copy = copy_bandwidth()
    print(f"copy {copy:.2f} TB/s")
    for tokens in (4096, 16384):
        x = torch.randn(tokens, 32, 128, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        angles = torch.rand(tokens, 64, device="cuda")
        cos, sin = angles.cos().bfloat16(), angles.sin().bfloat16()
        nbytes = 2 * x.numel() * 2
        offsets, positions = torch.zeros(2, device="cuda", dtype=torch.int32), torch.zeros(1, device="cuda").long()
        for block_h, block_half, warps in [(16, 64, 4), (32, 64, 4), (32, 64, 8), (8, 64, 2), (16, 64, 2), (4, 64, 1)]:
            grid = (tokens, 1, triton_cdiv(32, block_h))

            def launch():
                rotary_kernel[grid](
                    x,
                    y,
                    x,
                    cos,
                    sin,
                    offsets,
                    positions,
                    offsets,
                    32,
                    0,
                    64,
                    128,
                    tokens,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    4096,
                    128,
                    0,
                    4096,
                    128,
                    0,
                    0,
                    64,
                    BLOCK_H=block_h,
                    BLOCK_HALF=block_half,
                    num_warps=warps,
                )

            ms = bench_queued(launch)
            print(
                f"rotary {tokens} BLOCK_H={block_h} BLOCK_HALF={block_half} w{warps}: "
                f"{nbytes / ms / 1e9:.2f} TB/s ({nbytes / ms / 1e9 / copy:.0%})",
                flush=True,
            )
        x4 = x.view(1, tokens, 32, 128)
        out = torch.empty(1, tokens, 32, 256, device="cuda", dtype=torch.bfloat16)
        theta = torch.rand(32, 128, device="cuda")
        for block_h, block_d, warps in [(16, 64, 4), (8, 128, 4), (16, 128, 4), (8, 128, 8)]:
            grid = (tokens, 1, triton_cdiv(32, block_h))

            def launch():
                lrpe_cosine_kernel[grid](
                    x4,
                    theta,
                    out,
                    32,
                    128,
                    0,
                    0,
                    4096,
                    128,
                    128,
                    1,
                    0,
                    8192,
                    256,
                    BLOCK_H=block_h,
                    BLOCK_D=block_d,
                    num_warps=warps,
                )

            ms = bench_queued(launch)
            print(
                f"lrpe {tokens} BLOCK_H={block_h} BLOCK_D={block_d} w{warps}: {3 * x.numel() * 2 / ms / 1e9:.2f} TB/s",
                flush=True,
            )


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


if __name__ == "__main__":
    main()
