"""Scans along the last dim: the wheel's xopsaot.cumsum / logcumsumexp (scan_kernel, a [BLOCK_T, 1] tile per block;
logcumsumexp combines with an exp and a log1p) against a 1-D row kernel through Triton's JIT, whose logcumsumexp
scans (max, sum) pairs in base 2 (one exp2 per combine, one log2 per element). TB/s count x read and y written once.
(scan_kernel itself does not run under the JIT: it takes n as 64-bit, the JIT passes it as 32.)

    python3 benchmarks/experiments/scan_rows.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402
from kernels_src.scan import _pair_combine  # noqa: E402  (the shipped combine; the run in the records had a copy)


@triton.jit
def scan_rows(X, Y, n, LOG: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    X += row * n
    Y += row * n
    idx = tl.arange(0, BLOCK)
    last = idx == BLOCK - 1
    if LOG:
        carry_m = -float("inf")
        carry_s = 0.0
        for start in range(0, n, BLOCK):
            c = start + idx
            mask = c < n
            x = tl.load(X + c, mask=mask, other=-float("inf")).to(tl.float32) * 1.4426950408889634
            m, s = tl.associative_scan((x, tl.full([BLOCK], 1.0, tl.float32)), 0, _pair_combine)
            m, s = _pair_combine(carry_m, carry_s, m, s)
            tl.store(Y + c, ((m + tl.log2(s)) * 0.6931471805599453).to(Y.dtype.element_ty), mask=mask)
            carry_m = tl.max(tl.where(last, m, -float("inf")), axis=0)
            carry_s = tl.sum(tl.where(last, s, 0.0), axis=0)
    else:
        carry = 0.0
        for start in range(0, n, BLOCK):
            c = start + idx
            mask = c < n
            x = tl.load(X + c, mask=mask, other=0.0).to(tl.float32)
            tl.store(Y + c, (tl.cumsum(x, 0) + carry).to(Y.dtype.element_ty), mask=mask)
            carry += tl.sum(x, axis=0)


def main() -> None:
    warm_up_gpu(1.0)
    print(f"copy {copy_bandwidth():.2f} TB/s, triton {triton.__version__}")
    variants = [(1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16)]
    print("shape", "op", "eager", "xopsaot", *[f"{b}/{w}" for b, w in variants], "max error (new, 4096/8)", sep="\t")
    for rows, n in ((4096, 4096), (16384, 8192), (64, 100_003)):
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16) * 3
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * 2
        for op, name, torch_fn in ((0, "cumsum", torch.cumsum), (1, "logcumsumexp", torch.logcumsumexp)):
            row = [nbytes / bench_queued(lambda: torch_fn(x, -1)) / 1e9]
            ours = getattr(xopsaot, name)
            row.append(nbytes / bench_queued(lambda: ours(x, -1)) / 1e9)
            for block, warps in variants:
                fn = lambda: scan_rows[(rows,)](x, y, n, LOG=op == 1, BLOCK=block, num_warps=warps)  # noqa: E731
                row.append(nbytes / bench_queued(fn) / 1e9)
            y.fill_(float("nan"))
            scan_rows[(rows,)](x, y, n, LOG=op == 1, BLOCK=4096, num_warps=8)
            want = torch_fn(x.double(), -1)
            err = ((y.double() - want).abs() / want.abs().clamp_min(1.0)).max().item()
            print(f"{rows}x{n}", name, *[f"{v:.2f}" for v in row], f"{err:.1e}", sep="\t", flush=True)
    # adversarial logcumsumexp: a row whose prefix sits far below its later maximum, and rows of -inf
    x = torch.tensor([[-1000.0, -999.0, 0.0, -2000.0, 5.0], [-float("inf")] * 5], device="cuda")
    y = torch.empty_like(x)
    scan_rows[(2,)](x, y, 5, LOG=True, BLOCK=1024, num_warps=4)
    print("adversarial", y.tolist(), torch.logcumsumexp(x.double(), -1).tolist())


if __name__ == "__main__":
    main()
