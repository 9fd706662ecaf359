"""add with a transposed operand (x.T + y, 4096 x 4096 and 16384 x 8192, bf16) through the shipped strided
elementwise kernel (kernels_src/elementwise.py) in Triton's JIT, at several tiles, TB/s counting x, y and out once,
against torch eager and torch.compile in the same run.

Two ways of launching it: as the JIT does by default (strides of 1 folded into constants: contiguity known) and as
the wheel does (every stride a run-time value, do_not_specialize), so the gap between them shows what the AOT build
loses. "al" tiles take the kernel's ALIGNED path, which states in the source the alignment the JIT would specialize
on (the wheel's C side checks it before choosing that config).

    python3 benchmarks/experiments/strided_transpose.py
"""

import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.elementwise import elementwise_strided_kernel  # noqa: E402

STRIDES = [f"s{t}{d}" for t in "xyo" for d in range(4)]
AS_AOT = triton.jit(
    elementwise_strided_kernel.fn, do_not_specialize=["X", "Y", "OUT", "n_rows", "d1", "d2", "d3", *STRIDES]
)
TILES = [  # (BLOCK_R, BLOCK_C, warps, ALIGNED, OPS: 0 every op's code, 1 the light ops' only)
    (16, 128, 4, False, 0),
    (64, 64, 4, False, 0),
    (128, 32, 4, False, 0),
    (64, 64, 4, True, 0),
    (128, 32, 4, True, 0),
    (128, 32, 8, True, 0),
    (256, 16, 4, True, 0),
    (128, 64, 8, True, 0),
    (128, 32, 4, True, 1),
    (64, 64, 4, True, 1),
    (64, 64, 8, True, 1),
    (128, 64, 8, True, 1),
]


def launch(kernel, xt, y, out, tile):
    br, bc, warps, aligned, ops = tile
    m, n = out.shape
    strides = [0, 0, *xt.stride(), 0, 0, *y.stride(), 0, 0, *out.stride()]
    grid = (triton.cdiv(m, br) * triton.cdiv(n, bc),)
    kernel[grid](xt, y, out, m, 1, m, n, *strides, 0, 0, 0, 1.0, 0.0, 0, 0, 0.0, 0, BLOCK_R=br, BLOCK_C=bc, TILED=True,
                 ALIGNED=aligned, OPS=ops, num_warps=warps)  # fmt: skip


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    print(
        "shape",
        "eager",
        "compile",
        *[f"{r}x{c}/{w}{' al' if a else ''}{' light' if o else ''} jit | as aot" for r, c, w, a, o in TILES],
        sep="\t",
    )
    compiled = torch.compile(torch.add, dynamic=False)
    for m, n in ((4096, 4096), (16384, 8192)):
        xt = torch.randn(n, m, device="cuda", dtype=torch.bfloat16).T
        y = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(y)
        nbytes = 3 * y.numel() * 2
        want = xt.float() + y.float()
        cells = [
            nbytes / bench_queued(lambda: torch.add(xt, y)) / 1e9,
            nbytes / bench_queued(lambda: compiled(xt, y)) / 1e9,
        ]
        for tile in TILES:
            for kernel in (elementwise_strided_kernel, AS_AOT):
                out.fill_(float("nan"))
                launch(kernel, xt, y, out, tile)
                assert torch.allclose(out.float(), want, rtol=1e-2, atol=1e-2), tile
                cells.append(nbytes / bench_queued(lambda k=kernel, t=tile: launch(k, xt, y, out, t)) / 1e9)
        print(f"{m} x {n}", *[f"{c:.2f}" for c in cells], sep="\t", flush=True)


if __name__ == "__main__":
    main()
