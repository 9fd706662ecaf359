"""out = x.T + y on 2-D bf16 tensors (x contiguous, seen transposed), through Triton's JIT: a plain tile kernel with
32-bit offsets and no masks (the sizes multiples of the tile), as torch.compile generates for this function, at
several tiles, against the installed wheel's add and torch.compile in the same run. TB/s counting x, y read and
out written once; every result is checked against torch first.

    python3 benchmarks/experiments/transposed_tiles.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


@triton.jit
def transposed_add(X, Y, OUT, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                   INT64: tl.constexpr, GROUP: tl.constexpr):  # fmt: skip
    """out[i, j] = x[j, i] + y[i, j]: x (n_cols, n_rows) contiguous, y and out (n_rows, n_cols) contiguous."""
    pid = tl.program_id(0)
    tiles_c = n_cols // BLOCK_C
    if GROUP > 1:  # tiles in groups of GROUP rows of tiles, so neighbours share x's lines in L2
        tiles_r = n_rows // BLOCK_R
        per_group = GROUP * tiles_c
        first = (pid // per_group) * GROUP
        size = tl.minimum(tiles_r - first, GROUP)
        tr = first + (pid % per_group) % size
        tc = (pid % per_group) // size
    else:
        tr = pid // tiles_c
        tc = pid % tiles_c
    rows = tr * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tc * BLOCK_C + tl.arange(0, BLOCK_C)
    if INT64:
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
    x = tl.load(X + cols[None, :] * n_rows + rows[:, None])
    y = tl.load(Y + rows[:, None] * n_cols + cols[None, :])
    tl.store(
        OUT + rows[:, None] * n_cols + cols[None, :], (x.to(tl.float32) + y.to(tl.float32)).to(OUT.dtype.element_ty)
    )


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    compiled = torch.compile(lambda x, y: x.t() + y)
    for m, n in ((4096, 4096), (8192, 16384), (16384, 8192)):
        x = torch.randn(n, m, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        want = x.t() + y
        nbytes = 3 * x.numel() * 2
        cells = {"wheel": bench_queued(lambda: xopsaot.add(x.t(), y)), "compile": bench_queued(lambda: compiled(x, y))}
        out = torch.empty_like(y)
        for br, bc, warps in ((64, 64, 8), (64, 64, 4), (32, 128, 8), (128, 32, 8), (128, 64, 8), (64, 128, 8),
                              (16, 256, 8)):  # fmt: skip
            for int64 in (False, True):
                for group in (1, 8):
                    grid = (m // br * (n // bc),)

                    def run(br=br, bc=bc, warps=warps, int64=int64, group=group):
                        transposed_add[grid](x, y, out, m, n, BLOCK_R=br, BLOCK_C=bc, INT64=int64, GROUP=group,
                                             num_warps=warps)  # fmt: skip

                    out.fill_(float("nan"))
                    run()
                    assert torch.equal(out, want), (br, bc, warps)
                    cells[f"{br}x{bc}/{warps}{'/i64' if int64 else ''}{f'/g{group}' if group > 1 else ''}"] = (
                        bench_queued(run)
                    )
        print(f"{m} x {n}: " + ", ".join(f"{k} {nbytes / v / 1e9:.2f}" for k, v in cells.items()), flush=True)


if __name__ == "__main__":
    main()
