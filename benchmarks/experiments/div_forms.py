"""bf16 division (x / y, 4096 x 4096 and 16384 x 8192), TB/s counting each operand once: torch eager, the wheel's
xopsaot.div, the flat elementwise kernel as the wheel launches its division binary (FIXED_OP) through Triton's JIT,
and a plain division kernel in three forms: IEEE division in fp32 (libdevice.div_rn, what the wheel runs), Triton's
`/` (div.full.f32, within 2 ulp of fp32) and div_rn with two blocks per program. Each kernel's output is checked
against torch's quotient, bit for bit, and its registers per thread printed: on an H200 the wheel's division read
0.90-0.93x torch eager where exp, sharing its kernel, reads at copy speed (h200-2026-11-28-elementwise.md).

    python3 benchmarks/experiments/div_forms.py
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

import xopsaot  # noqa: E402
from kernels_src.elementwise import FLAT_BLOCK, elementwise_kernel  # noqa: E402

AS_AOT = triton.jit(elementwise_kernel.fn, do_not_specialize=["n", "op", "mode_x", "mode_y"])
DIV = 2  # XOPSAOT_EW_DIV


@triton.jit
def div_kernel(X, Y, OUT, n, FORM: tl.constexpr, BLOCK: tl.constexpr, BLOCKS: tl.constexpr):
    """FORM 0: libdevice.div_rn in fp32; 1: Triton's `/` in fp32 (div.full.f32)."""
    for b in tl.static_range(BLOCKS):
        offs = (tl.program_id(0).to(tl.int64) * BLOCKS + b) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(X + offs, mask=offs < n).to(tl.float32)
        y = tl.load(Y + offs, mask=offs < n, other=1.0).to(tl.float32)
        r = libdevice.div_rn(x, y) if FORM == 0 else x / y
        tl.store(OUT + offs, r.to(OUT.dtype.element_ty), mask=offs < n)


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    columns = ["eager", "xopsaot.div", "FIXED_OP jit", "div_rn", "a / b", "div_rn 2 blocks"]
    print("shape", *columns, "mismatches of a / b", sep="\t")
    registers = {}
    for m, n in ((4096, 4096), (16384, 8192)):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        total = x.numel()
        want = torch.div(x, y)
        grid = (triton.cdiv(total, FLAT_BLOCK),)

        def checked(run, name):
            out.fill_(float("nan"))
            compiled = run()
            if hasattr(compiled, "n_regs"):
                registers[name] = compiled.n_regs
            exact = torch.equal(out.view(torch.int16), want.view(torch.int16))
            if not exact:
                print(f"  {name}: {(out.view(torch.int16) != want.view(torch.int16)).sum().item()} quotients differ")
            return bench_queued(run)

        def fixed():
            return AS_AOT[grid](x, y, out, total, n, DIV, 0, 0, 1.0, 0.0, 0, 0, 0.0, 0, OPS=2, FIXED_OP=DIV,
                                BLOCK=FLAT_BLOCK, num_warps=4)  # fmt: skip

        def plain(form, blocks=1):
            return lambda: div_kernel[(triton.cdiv(total, FLAT_BLOCK * blocks),)](
                x, y, out, total, FORM=form, BLOCK=FLAT_BLOCK, BLOCKS=blocks, num_warps=4
            )

        nbytes = 3 * total * 2
        ms = [
            bench_queued(lambda: torch.div(x, y)),
            checked(lambda: xopsaot.div(x, y, out=out), "xopsaot.div"),
            checked(fixed, "FIXED_OP jit"),
            checked(plain(0), "div_rn"),
            checked(plain(1), "a / b"),
            checked(plain(0, 2), "div_rn 2 blocks"),
        ]
        out.fill_(float("nan"))
        plain(1)()
        differ = (out.view(torch.int16) != want.view(torch.int16)).sum().item()
        print(f"{m} x {n}", *[f"{nbytes / t / 1e9:.2f}" for t in ms], differ, sep="\t", flush=True)
    print("registers per thread:", registers)
    print("every pair of bf16 values, a / b against torch.div:", exhaustive(), "quotients differ (NaNs alike)")


def exhaustive() -> int:
    """Triton's `/` in fp32, rounded to bf16, against torch's IEEE quotient for all 2^32 pairs of bf16 values."""
    x = torch.arange(-(2**15), 2**15, device="cuda", dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    differ, rows = 0, 2048
    for start in range(0, x.numel(), rows):
        y = x[start : start + rows]
        a, b = x[None, :].expand(rows, -1).contiguous(), y[:, None].expand(-1, x.numel()).contiguous()
        out = torch.empty_like(a)
        total = a.numel()
        div_kernel[(triton.cdiv(total, FLAT_BLOCK),)](a, b, out, total, FORM=1, BLOCK=FLAT_BLOCK, BLOCKS=1,
                                                        num_warps=4)  # fmt: skip
        want = torch.div(a, b)
        same = (out.view(torch.int16) == want.view(torch.int16)) | (out.isnan() & want.isnan())
        differ += (~same).sum().item()
    return differ


if __name__ == "__main__":
    main()
