"""linear at decode batches (1 to 64 rows, bf16, weight (N, K) K-contiguous): the shipped matmul kernel as the
wheel launches it (M, K and the strides not specialized beyond the wheel's hints) against two other forms, in
Triton's JIT, beside F.linear (cuBLAS) in the same run. TB/s of the weight's bytes, device time of queued calls, each
call reading the next of several weights (together past the 50 MB L2), as a model's layers do.

Forms:
- tc BM/BN/BK/warps/stages: matmul_kernel, the rows on the dot's M side (16 rows at least: mma.sync on sm_90).
- swap BN/BM/BK/warps/stages: the weight's rows on the dot's M side and the batch rows on its N side,
  out^T = W @ x^T, so the 64-row wgmma tile takes the weight and a batch of 1-16 rows is padded to 16 only.
- cc BN/BK/warps/stages: one row of x (M = 1) on CUDA cores, each thread's products summed once at the end.
- ccr BN/BK/warps/stages: the same for up to 8 rows, each weight tile loaded once for all of them (--ccr: only these).

    python3 benchmarks/experiments/gemv_forms.py [--rows 1,4,16] [--bias]
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import Rotation, bench_queued, warm_up_gpu  # noqa: E402

from kernels_src.matmul import matmul_kernel  # noqa: E402

# as the wheel launches it: M, K and the unhinted strides are run-time values of no known divisibility
SHIPPED = triton.jit(matmul_kernel.fn, do_not_specialize=["M", "K", "stride_im", "stride_in"])


@triton.jit(do_not_specialize=["M", "K"])
def swap_kernel(X, W, Bias, Out, M, N, K, stride_xm, stride_w, stride_om, has_bias,
                BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """out[m, n] = x[m, :] . w[n, :] (+ bias[n]) with the weight's rows as the dot's rows."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rk = tl.arange(0, BLOCK_K)
    w_ptrs = W + rn[:, None].to(tl.int64) * stride_w + rk[None, :]
    x_ptrs = X + rm[:, None].to(tl.int64) * stride_xm + rk[None, :]
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        acc = tl.dot(tl.load(w_ptrs), tl.trans(tl.load(x_ptrs)), acc)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    tail = K % BLOCK_K
    if tail:
        w = tl.load(w_ptrs, mask=rk[None, :] < tail, other=0.0)
        x = tl.load(x_ptrs, mask=rk[None, :] < tail, other=0.0)
        acc = tl.dot(w, tl.trans(x), acc)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if has_bias:
        acc += tl.load(Bias + cn, mask=cn < N, other=0.0).to(tl.float32)[:, None]
    out_ptrs = Out + cm[None, :].to(tl.int64) * stride_om + cn[:, None]
    tl.store(out_ptrs, acc.to(Out.dtype.element_ty), mask=(cn[:, None] < N) & (cm[None, :] < M))


@triton.jit(do_not_specialize=["K"])
def cuda_core_kernel(X, W, Bias, Out, N, K, stride_w, has_bias, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """out[0, n] = x[0, :] . w[n, :] (+ bias[n]) on CUDA cores."""
    pid = tl.program_id(0)
    rn = (pid * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    w_ptrs = W + rn[:, None].to(tl.int64) * stride_w + rk[None, :]
    x_ptrs = X + rk
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        acc += tl.load(w_ptrs).to(tl.float32) * tl.load(x_ptrs).to(tl.float32)[None, :]
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    tail = K % BLOCK_K
    if tail:
        w = tl.load(w_ptrs, mask=rk[None, :] < tail, other=0.0).to(tl.float32)
        acc += w * tl.load(x_ptrs, mask=rk < tail, other=0.0).to(tl.float32)[None, :]
    out = tl.sum(acc, axis=1)
    cn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    if has_bias:
        out += tl.load(Bias + cn, mask=cn < N, other=0.0).to(tl.float32)
    tl.store(Out + cn, out.to(Out.dtype.element_ty), mask=cn < N)


@triton.jit(do_not_specialize=["M", "K"])
def cuda_core_rows_kernel(X, W, Bias, Out, M, N, K, stride_xm, stride_w, stride_om, has_bias, ROWS: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """out[m, n] = x[m, :] . w[n, :] (+ bias[n]) on CUDA cores for up to ROWS rows, each weight tile loaded once."""
    pid = tl.program_id(0)
    rn = (pid * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rm = tl.arange(0, ROWS)
    rk = tl.arange(0, BLOCK_K)
    w_ptrs = W + rn[:, None].to(tl.int64) * stride_w + rk[None, :]
    x_ptrs = X + (rm % M)[:, None].to(tl.int64) * stride_xm + rk[None, :]
    acc = tl.zeros((ROWS, BLOCK_N, BLOCK_K), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        w = tl.load(w_ptrs).to(tl.float32)
        acc += w[None, :, :] * tl.load(x_ptrs).to(tl.float32)[:, None, :]
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    tail = K % BLOCK_K
    if tail:
        w = tl.load(w_ptrs, mask=rk[None, :] < tail, other=0.0).to(tl.float32)
        acc += w[None, :, :] * tl.load(x_ptrs, mask=rk[None, :] < tail, other=0.0).to(tl.float32)[:, None, :]
    out = tl.sum(acc, axis=2)
    cn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    if has_bias:
        out += tl.load(Bias + cn, mask=cn < N, other=0.0).to(tl.float32)[None, :]
    out_ptrs = Out + rm[:, None].to(tl.int64) * stride_om + cn[None, :]
    tl.store(out_ptrs, out.to(Out.dtype.element_ty), mask=(rm[:, None] < M) & (cn[None, :] < N))


def tc(x, w, b, out, tile):
    bm, bn, bk, warps, stages = tile
    m, k = x.shape
    n = w.shape[0]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    SHIPPED[grid](x, w, out, b if b is not None else out, out, m, n, k, 0, x.stride(0), 0, w.stride(0), 0,
                  out.stride(0), 0, 1, 0, 1.0, 1.0, int(b is not None), 0, -1, B_K_CONTIGUOUS=True,
                  EPILOGUE=b is not None, IEEE=False, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=1,
                  num_warps=warps, num_stages=stages)  # fmt: skip


def swap(x, w, b, out, tile):
    bn, bm, bk, warps, stages = tile
    m, k = x.shape
    n = w.shape[0]
    grid = (triton.cdiv(n, bn), triton.cdiv(m, bm))
    swap_kernel[grid](x, w, b if b is not None else out, out, m, n, k, x.stride(0), w.stride(0), out.stride(0),
                      int(b is not None), BLOCK_N=bn, BLOCK_M=bm, BLOCK_K=bk, num_warps=warps,
                      num_stages=stages)  # fmt: skip


def cuda_core(x, w, b, out, tile):
    bn, bk, warps, stages = tile
    n, k = w.shape
    cuda_core_kernel[(triton.cdiv(n, bn),)](x, w, b if b is not None else out, out, n, k, w.stride(0),
                                             int(b is not None), BLOCK_N=bn, BLOCK_K=bk, num_warps=warps,
                                             num_stages=stages)  # fmt: skip


def cuda_core_rows(x, w, b, out, tile):
    bn, bk, warps, stages = tile
    m, k = x.shape
    n = w.shape[0]
    rows = triton.next_power_of_2(m)
    cuda_core_rows_kernel[(triton.cdiv(n, bn),)](x, w, b if b is not None else out, out, m, n, k, x.stride(0),
                                                  w.stride(0), out.stride(0), int(b is not None), ROWS=rows,
                                                  BLOCK_N=bn, BLOCK_K=bk, num_warps=warps,
                                                  num_stages=stages)  # fmt: skip


FORMS = [
    ("tc", tc, (16, 32, 256, 4, 4)),  # shipped up to 16 rows
    ("tc", tc, (64, 32, 128, 4, 4)),  # shipped up to 64 rows
    ("tc", tc, (16, 128, 64, 4, 4)),
    ("tc", tc, (16, 64, 128, 4, 4)),
    ("swap", swap, (64, 16, 128, 4, 4)),
    ("swap", swap, (64, 16, 256, 4, 3)),
    ("swap", swap, (128, 16, 128, 4, 4)),
    ("swap", swap, (128, 16, 64, 4, 6)),
    ("swap", swap, (64, 32, 128, 4, 4)),
    ("swap", swap, (64, 64, 128, 4, 4)),
    ("swap", swap, (128, 64, 64, 4, 4)),
    ("cc", cuda_core, (8, 512, 4, 3)),
    ("cc", cuda_core, (16, 512, 4, 3)),
    ("cc", cuda_core, (16, 256, 4, 4)),
    ("cc", cuda_core, (32, 256, 8, 3)),
    ("ccr", cuda_core_rows, (8, 512, 4, 3)),
    ("ccr", cuda_core_rows, (8, 256, 4, 3)),
    ("ccr", cuda_core_rows, (16, 256, 4, 3)),
    ("ccr", cuda_core_rows, (4, 512, 4, 3)),
    ("ccr", cuda_core_rows, (8, 128, 4, 4)),
]
SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096)]  # N, K


def option(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> None:
    row_counts = [int(m) for m in option("--rows", "1,4,16").split(",")]
    with_bias = "--bias" in sys.argv
    warm_up_gpu()
    print(f"TB/s of the weight, bias {with_bias}; a cell with (err) failed the 1e-2 check")
    print("M N K", "F.linear", *[f"{name} " + "/".join(map(str, t)) for name, _, t in FORMS], sep="\t")
    for n, k in SHAPES:
        rot = Rotation(lambda n=n, k=k: torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5)
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16) if with_bias else None
        for m in row_counts:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            ref = F.linear(x.double(), rot.tensors[0].double(), None if b is None else b.double())
            cells = [f"{n * k * 2 / bench_queued(lambda: F.linear(x, rot.next(), b)) / 1e9:.2f}"]
            for name, fn, tile in FORMS:
                only_ccr = "--ccr" in sys.argv and name not in ("ccr", "tc")
                if (name == "cc" and m != 1) or (name == "ccr" and m > 8) or only_ccr:
                    cells.append("-")
                    continue
                out.fill_(float("nan"))
                fn(x, rot.tensors[0], b, out, tile)
                err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
                ms = bench_queued(lambda fn=fn, tile=tile: fn(x, rot.next(), b, out, tile))
                cells.append(f"{n * k * 2 / ms / 1e9:.2f}" + ("" if err < 1e-2 else f" (err {err:.0e})"))
            print(f"{m} {n} {k}", *cells, sep="\t", flush=True)


if __name__ == "__main__":
    main()
