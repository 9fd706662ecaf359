"""layer_norm on rows held whole, through Triton's JIT: the statistics in two rounds of block reductions (the mean,
then the squares about it: the shipped form) against one round. TB/s (x read, y written once; bursts of ten calls
queued behind a sleeping kernel), bf16, weight and bias; rms_norm's single sum as the ceiling. In brackets: the
largest error against float64 on random rows, then on rows whose first element is a spike of 1000 (the shifted forms
take the row's first element as their shift: their worst case).

    python3 benchmarks/experiments/layer_norm_rounds.py

Forms: two-round (mean, then squares about it), shifted-pair (sums of d = x - x[0] and d^2 in one tl.reduce),
shifted-sums (the same two sums as two tl.sum), welford (Chan's merge of (count, mean, m2) in one tl.reduce), rms.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

FORMS = {"two-round": 0, "shifted-pair": 1, "shifted-sums": 2, "welford": 3, "rms": 4}


@triton.jit
def _add_pair(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@triton.jit
def _chan(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    n = n_a + n_b
    frac = n_b / tl.maximum(n, 1.0)
    delta = mean_b - mean_a
    return n, mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac


@triton.jit
def layer_norm_row(X, W, B, Y, n_cols, eps, FORM: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    if FORM == 0:
        x = tl.where(mask, x - tl.sum(x, axis=0) / n_cols, 0.0)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        x_hat = x * rstd
    elif FORM == 1 or FORM == 2:
        shift = tl.load(X + row * n_cols).to(tl.float32)
        d = tl.where(mask, x - shift, 0.0)
        if FORM == 1:
            s1, s2 = tl.reduce((d, d * d), 0, _add_pair)
        else:
            s1 = tl.sum(d, axis=0)
            s2 = tl.sum(d * d, axis=0)
        mean_d = s1 / n_cols
        rstd = tl.rsqrt(tl.maximum(s2 / n_cols - mean_d * mean_d, 0.0) + eps)
        x_hat = (d - mean_d) * rstd
    elif FORM == 3:
        count = mask.to(tl.float32)
        n, mean, m2 = tl.reduce((count, x, tl.zeros_like(x)), 0, _chan)
        rstd = tl.rsqrt(m2 / n_cols + eps)
        x_hat = (x - mean) * rstd
    else:
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        x_hat = x * rstd
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * n_cols + cols, (x_hat * w + b).to(Y.dtype.element_ty), mask=mask)


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    for rows, n, block, warps in ((4096, 32000, 32768, 32), (4096, 16384, 16384, 32), (4096, 8192, 8192, 16)):
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        w, b = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.randn(n, device="cuda", dtype=torch.bfloat16)
        spiky = torch.randn(64, n, device="cuda", dtype=torch.bfloat16)
        spiky[:, 0] = 1000.0
        y = torch.empty_like(x)
        parts = []
        for name, form in FORMS.items():

            def call(src=x, out=y, form=form):
                layer_norm_row[(src.shape[0],)](src, w, b, out, n, 1e-5, FORM=form, BLOCK_N=block, num_warps=warps)

            errs = []
            for src in (x[:64], spiky):
                out = torch.empty_like(src)
                call(src, out)
                ref = torch.nn.functional.layer_norm(src.double(), (n,), w.double(), b.double(), 1e-5)
                if form == 4:
                    ref = torch.nn.functional.rms_norm(src.double(), (n,), w.double(), 1e-5) + b.double()
                errs.append((out.double() - ref).abs().max().item())
            ms = bench_queued(call)
            parts.append(f"{name} {2 * x.numel() * 2 / ms / 1e9:.2f} ({errs[0]:.0e}, {errs[1]:.0e})")
        print(f"{rows} x {n} ({block}/{warps}): " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
