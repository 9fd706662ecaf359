"""A matmul whose tiles arrive by TMA (tensor descriptors) against the wheel's pointer-based matmul_kernel and cuBLAS,
bf16 squares 4096 and 8192, both layouts of b: N-contiguous (mm) and K-contiguous (linear, x @ W.T). The TMA
kernel runs through the device's Triton JIT with the wheel's sm_90 tile (128 x 256 x 64, 8 warps, 3 stages,
GROUP_M 8) and a few others; TFLOP/s from CUDA events (median), each result checked against cuBLAS's.

    python3 benchmarks/experiments/matmul_tma.py
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


@triton.jit
def matmul_tma_kernel(
    A, B, C, M, N, K, stride_am, stride_b, stride_cm,
    B_K_CONTIGUOUS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * tiles_n
    first_m = (pid // group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % group_m
    pid_n = (pid % group) // group_m
    a_desc = tl.make_tensor_descriptor(A, [M, K], [stride_am, 1], [BLOCK_M, BLOCK_K])
    if B_K_CONTIGUOUS:
        b_desc = tl.make_tensor_descriptor(B, [N, K], [stride_b, 1], [BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(B, [K, N], [stride_b, 1], [BLOCK_K, BLOCK_N])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        if B_K_CONTIGUOUS:
            b = tl.trans(b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]))
        else:
            b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc = tl.make_tensor_descriptor(C, [M, N], [stride_cm, 1], [BLOCK_M, BLOCK_N])
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(C.dtype.element_ty))


def tma_matmul(a, b, k_contiguous, bm, bn, bk, warps, stages):
    m, k = a.shape
    n = b.shape[0] if k_contiguous else b.shape[1]
    c = torch.empty(m, n, device="cuda", dtype=a.dtype)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    matmul_tma_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), k_contiguous, bm, bn, bk, 8,
                            num_warps=warps, num_stages=stages)  # fmt: skip
    return c


def main() -> None:
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    warm_up_gpu()
    configs = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4)]
    print("n layout cuBLAS wheel " + " ".join("tma {}x{}x{}/w{}/s{}".format(*c) for c in configs))
    for n in (4096, 8192):
        flop = 2 * n**3
        a, w = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        for layout in ("mm", "linear"):
            k_contiguous = layout == "linear"
            if k_contiguous:
                ref_fn, wheel_fn = (lambda: F.linear(a, w)), (lambda: xopsaot.linear(a, w))
            else:
                ref_fn, wheel_fn = (lambda: a @ w), (lambda: xopsaot.mm(a, w))
            ref = ref_fn().float()
            cells = [flop / bench(ref_fn) / 1e9, flop / bench(wheel_fn) / 1e9]
            for bm, bn, bk, warps, stages in configs:
                fn = lambda c=(bm, bn, bk, warps, stages): tma_matmul(a, w, k_contiguous, *c)  # noqa: E731
                try:
                    err = ((fn().float() - ref).norm() / ref.norm()).item()
                    cells.append(f"{flop / bench(fn) / 1e9:.0f} ({err:.0e})")
                except Exception as e:  # noqa: BLE001  out of resources: report and go on
                    cells.append(type(e).__name__)
            print(n, layout, " ".join(c if isinstance(c, str) else f"{c:.0f}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
