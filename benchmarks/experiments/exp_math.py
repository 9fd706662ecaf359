"""exp and division on bf16 (4096 x 4096 and 16384 x 8192), TB/s counting each operand once: torch eager against the
flat elementwise kernel launched as the wheel does (op and n run-time values) in its shared math binaries (OPS=3:
exp, rsqrt, sin, cos; OPS=2: division and pow) and in the op's own binary (FIXED_OP), and against a plain exp kernel
through Triton's JIT: libdevice's exp (IEEE-accurate, what the wheel runs) and tl.exp (exp2 of x log2 e, the hardware
approximation). Before OPS=3, exp shared OPS=2 with pow and division (the experiments record of 2026-11-23).

    python3 benchmarks/experiments/exp_math.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.elementwise import elementwise_kernel  # noqa: E402

AS_AOT = triton.jit(elementwise_kernel.fn, do_not_specialize=["n", "op", "mode_x", "mode_y"])
DIV, EXP = 2, 18  # XOPSAOT_EW_*


@triton.jit
def exp_kernel(X, OUT, n, ACCURATE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n).to(tl.float32)
    y = libdevice.exp(x) if ACCURATE else tl.exp(x)
    tl.store(OUT + offs, y.to(OUT.dtype.element_ty), mask=offs < n)


def checked(run, out, want) -> float:
    out.fill_(float("nan"))
    run()
    assert torch.allclose(out.float(), want, rtol=1e-2, atol=1e-2)
    return bench_queued(run)


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    columns = ["exp eager", "exp OPS=3", "exp FIXED_OP", "libdevice 1024/4", "tl.exp 1024/4", "div eager", "div OPS=2",
               "div FIXED_OP"]  # fmt: skip
    print("shape", *columns, sep="\t")
    for m, n in ((4096, 4096), (16384, 8192)):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        y = torch.rand(m, n, device="cuda", dtype=torch.bfloat16) + 0.5
        out = torch.empty_like(x)
        total = x.numel()
        grid = (triton.cdiv(total, 1024),)

        def flat(op, ops, b, fixed=0):
            AS_AOT[grid](x, b, out, total, n, op, 0, 0, 1.0, 0.0, 0, 0, 0.0, 0, OPS=ops, FIXED_OP=fixed, BLOCK=1024,
                         num_warps=4)  # fmt: skip

        exp_want, div_want = torch.exp(x.float()), x.float() / y.float()
        unary, binary = 2 * total * 2, 3 * total * 2
        cells = [
            unary / bench_queued(lambda: torch.exp(x)),
            unary / checked(lambda: flat(EXP, 3, x), out, exp_want),
            unary / checked(lambda: flat(EXP, 3, x, EXP), out, exp_want),
            unary / checked(lambda: exp_kernel[grid](x, out, total, ACCURATE=True, BLOCK=1024), out, exp_want),
            unary / checked(lambda: exp_kernel[grid](x, out, total, ACCURATE=False, BLOCK=1024), out, exp_want),
            binary / bench_queued(lambda: torch.div(x, y)),
            binary / checked(lambda: flat(DIV, 2, y), out, div_want),
            binary / checked(lambda: flat(DIV, 2, y, DIV), out, div_want),
        ]
        print(f"{m} x {n}", *[f"{c / 1e9:.2f}" for c in cells], sep="\t", flush=True)


if __name__ == "__main__":
    main()
