"""Softmax and log_softmax rows of 32k-131k columns (vocabulary rows): how the looping kernel (x read twice) keeps
its row in flight, and whether holding the row whole in registers (x read once) would pay. Triton's JIT, launched
as the wheel launches the kernel (mode not specialized); TB/s counting x read and y written once, bf16, with the
copy bandwidth; every output checked against float64.

- default: `loop`, the shipped kernel in its looping config for the row (steps of 8192 / 16 warps below 73728
  columns, 16384 / 32 warps from there); `whole`, the shipped kernel with LOOP=False and a block of the row's power
  of two (its exponentials stay live across the sum, 64-128 float32 values per thread); `recompute`, a held row
  kept in x's 16-bit type whose exponentials are computed again for the write.
- `stages`: the looping config at num_stages 1 to 4 (the wheel compiles 3, Triton's default).
- `steps`: the looping kernel at other steps and warps.

Stop 23 ran the three modes against 9420be7's kernel, whose loops loaded each step where they used it; since then the
kernel loads a step ahead, and `steps` times that form (h100-2026-11-24-experiments.md).

    python3 benchmarks/experiments/held_vocab_rows.py [stages | steps]
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
STEPS = [(4096, 8), (8192, 16), (16384, 32), (8192, 32)]


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
        y = tl.exp2(x.to(tl.float32) * scale - safe * scale) / total  # written differently: not merged with the sum's
    else:
        y = x.to(tl.float32) - (safe + tl.log(total))
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def runs_for(how: str, x, y, mode: int) -> dict:
    """Label -> launch of mode's kernel on x into y, for the script's mode `how`."""
    rows, n = x.shape
    step, warps = (8192, 16) if n < 73728 else (16384, 32)

    def loop(block, warps, **options):
        return lambda: SOFTMAX[(rows,)](x, y, n, n, n, mode, BLOCK_N=block, LOOP=True, LSE=False, num_warps=warps,
                                        **options)  # fmt: skip

    if how == "stages":
        return {f"loop s{k}": loop(step, warps, num_stages=k) for k in (1, 2, 3, 4)}
    if how == "steps":
        return {f"loop {b}/{w}": loop(b, w) for b, w in STEPS}
    block = triton.next_power_of_2(n)
    return {
        "loop": loop(step, warps),
        "whole": lambda: SOFTMAX[(rows,)](x, y, n, n, n, mode, BLOCK_N=block, LOOP=False, LSE=False, num_warps=32),
        "recompute": lambda: held_recompute[(rows,)](x, y, n, n, n, mode, BLOCK_N=block, num_warps=32),
    }


def main() -> None:
    how = next((a for a in sys.argv[1:] if a in ("stages", "steps")), "held")
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    header = False
    for rows, n in SHAPES:
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16) * 4
        y = torch.empty_like(x)
        size = x.numel() * x.element_size()
        for mode, name in ((0, "softmax"), (1, "log_softmax")):
            want = (torch.softmax if mode == 0 else torch.log_softmax)(x.double(), -1)
            runs = runs_for(how, x, y, mode)
            if not header:
                print("shape", "op", *runs, sep="\t")
                header = True
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
