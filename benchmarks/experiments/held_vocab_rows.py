"""Softmax and log_softmax rows of 32k-131k columns (vocabulary rows) held whole in registers by 32 warps, so x is
read once, against the shipped looping configs that read it twice. Triton's JIT, launched as the wheel launches the
kernel (mode not specialized); TB/s counting x read and y written once, bf16, with the copy bandwidth; every output
checked against float64.

- `loop`: the shipped kernel in its looping config for the row (steps of 8192 / 16 warps below 73728 columns, 16384
  / 32 warps from there).
- `whole`: the shipped kernel unchanged with LOOP=False and a block of the row's power of two: its exponentials
  stay live across the sum, 64-128 float32 values per thread.
- `recompute`: a held row kept in x's 16-bit type; the sum's exponentials are not kept but computed again for the
  write (written differently, so the compiler does not merge the two).

    python3 benchmarks/experiments/held_vocab_rows.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.softmax import softmax_kernel  # noqa: E402

SOFTMAX = triton.jit(softmax_kernel.fn, do_not_specialize=["mode"])
SHAPES = [(4096, 50304), (2048, 65536), (2048, 81920), (1024, 100000), (1024, 128256), (1024, 131072)]


@triton.jit(do_not_specialize=["mode"])
def held_recompute(X, Y, stride_x, stride_y, n_cols, mode, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf"))
    row_max = tl.max(x, axis=0).to(tl.float32)
    safe = tl.where(row_max == -float("inf"), 0.0, row_max)
    total = tl.sum(tl.exp2((x.to(tl.float32) - safe) * 1.4426950408889634), axis=0)
    if mode == 0:
        scale = 1.4426950408889634
        y = tl.exp2(x.to(tl.float32) * scale - safe * scale) / total
    else:
        y = x.to(tl.float32) - (safe + tl.log(total))
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    print("shape", "op", "loop", "whole", "recompute", sep="\t")
    for rows, n in SHAPES:
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16) * 4
        y = torch.empty_like(x)
        size = x.numel() * x.element_size()
        block = triton.next_power_of_2(n)
        step, warps = (8192, 16) if n < 73728 else (16384, 32)
        for mode, name in ((0, "softmax"), (1, "log_softmax")):
            want = (torch.softmax if mode == 0 else torch.log_softmax)(x.double(), -1)
            runs = {
                "loop": lambda m=mode: SOFTMAX[(rows,)](
                    x, y, n, n, n, m, BLOCK_N=step, LOOP=True, LSE=False, num_warps=warps
                ),
                "whole": lambda m=mode: SOFTMAX[(rows,)](
                    x, y, n, n, n, m, BLOCK_N=block, LOOP=False, LSE=False, num_warps=32
                ),
                "recompute": lambda m=mode: held_recompute[(rows,)](x, y, n, n, n, m, BLOCK_N=block, num_warps=32),
            }
            cells = []
            for label, fn in runs.items():
                y.fill_(float("nan"))
                fn()
                err = ((y.double() - want).abs() / (want.abs() + 1e-3)).max().item()
                assert err < 1e-2, (rows, n, name, label, err)
                cells.append(2 * size / bench_queued(fn) / 1e9)
            print(f"{rows}x{n}", name, *[f"{c:.2f}" for c in cells], sep="\t", flush=True)


if __name__ == "__main__":
    main()
