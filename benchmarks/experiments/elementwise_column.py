"""x * column (bf16, x (m, n), the column (m, 1)): the flat elementwise kernel against minimal column kernels, to
find what its 0.98-0.99x of torch.compile there costs. TB/s counting x read and the output written once; in one run
with torch eager, torch.compile, the wheel and the copy bandwidth; every result checked against torch first.

- shipped: elementwise_kernel (kernels_src/elementwise.py, OPS=1, the light ops' binary) launched as the wheel does
  (n, op and the modes run-time values), at its BLOCK of 1024 and at 2048 / 4096;
- minimal: x's block times the column's one or two values, the block's row from an int64 or an int32 division, or
  from a 2-D grid (a program per row chunk: no division at all).

    python3 benchmarks/experiments/elementwise_column.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.elementwise import elementwise_kernel  # noqa: E402

AS_AOT = triton.jit(elementwise_kernel.fn, do_not_specialize=["n", "op", "mode_x", "mode_y"])
MUL = 1  # XOPSAOT_EW_MUL


@triton.jit(do_not_specialize=["n"])
def column_kernel(X, C, OUT, n, inner, INT32: tl.constexpr, BLOCK: tl.constexpr):
    if INT32:
        start32 = tl.program_id(0) * BLOCK
        start = start32.to(tl.int64)
        c0 = start32 % inner.to(tl.int32)
        row0 = (start32 // inner.to(tl.int32)).to(tl.int64)
    else:
        start = tl.program_id(0).to(tl.int64) * BLOCK
        c0 = (start % inner).to(tl.int32)
        row0 = start // inner
    offs = start + tl.arange(0, BLOCK)
    cols = c0 + tl.arange(0, BLOCK)
    first = tl.load(C + row0)
    second = tl.load(C + row0 + 1, mask=c0 + BLOCK > inner)
    c = tl.where(cols >= inner, second, first).to(tl.float32)
    if start + BLOCK <= n:
        tl.store(OUT + offs, (tl.load(X + offs).to(tl.float32) * c).to(OUT.dtype.element_ty))
    else:
        mask = offs < n
        x = tl.load(X + offs, mask=mask).to(tl.float32)
        tl.store(OUT + offs, (x * c).to(OUT.dtype.element_ty), mask=mask)


@triton.jit
def column_2d_kernel(X, C, OUT, inner, BLOCK: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inner
    c = tl.load(C + row).to(tl.float32)
    x = tl.load(X + row * inner + cols, mask=mask).to(tl.float32)
    tl.store(OUT + row * inner + cols, (x * c).to(OUT.dtype.element_ty), mask=mask)


def main() -> None:
    import xopsaot

    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    compiled = torch.compile(torch.mul)
    for m, n in ((4096, 4096), (16384, 8192), (8192, 4096), (4096, 11008)):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        col = torch.randn(m, 1, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        want = x * col
        nbytes = 2 * x.numel() * 2
        runs = {
            "eager": lambda: torch.mul(x, col),
            "compile": lambda: compiled(x, col),
            "wheel": lambda: xopsaot.mul(x, col, out=out),
        }
        for block, warps in ((1024, 4), (2048, 4), (2048, 8), (4096, 8)):
            grid = (triton.cdiv(x.numel(), block),)
            runs[f"shipped {block}/{warps}"] = lambda g=grid, b=block, w=warps: AS_AOT[g](
                x, col, out, x.numel(), n, MUL, 0, 3, 1.0, 1.0, 1, 1, 0.0, 0, OPS=1, FIXED_OP=0, BLOCK=b, num_warps=w
            )
            for int32 in (False, True):
                runs[f"minimal {'i32' if int32 else 'i64'} {block}/{warps}"] = (
                    lambda g=grid, b=block, w=warps, i=int32: column_kernel[g](x, col, out, x.numel(), n, INT32=i,
                                                                                BLOCK=b, num_warps=w))  # fmt: skip
        for block, warps in ((1024, 4), (2048, 4), (4096, 8)):
            grid = (triton.cdiv(n, block), m)
            runs[f"2-D {block}/{warps}"] = lambda g=grid, b=block, w=warps: column_2d_kernel[g](
                x, col, out, n, BLOCK=b, num_warps=w
            )
        cells = []
        for name, fn in runs.items():
            out.fill_(float("nan"))
            got = fn()
            got = got if isinstance(got, torch.Tensor) and name != "wheel" else out
            assert torch.equal(got, want), (name, (got.float() - want.float()).abs().max())
            cells.append(f"{name} {nbytes / bench_queued(fn) / 1e9:.2f}")
        print(f"{m} x {n}:", "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
