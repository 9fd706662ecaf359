"""xopsaot.linear against F.linear (cuBLAS) from 64 to 2048 rows, bf16, no bias, on 4096- to 14336-wide weights:
device time of queued calls, each reading the next of several weights (together past the L2). Past 64 rows
matmul_kernel took its 128-row tile, which gives a 4096-column weight few programs until the rows reach about a
thousand; since stop 35, on Hopper, past 256 rows matmul_ws takes them (128 x 128 tiles where 128 x 256 ones would
not fill the GPU), and 65 to 256 rows against weights of 6144 or more columns (K) split along K.

    python3 benchmarks/experiments/linear_rows.py
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import Rotation, bench_queued, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


def main() -> None:
    warm_up_gpu()
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (4096, 8192)):
        w = Rotation(lambda n=n, k=k: torch.randn(n, k, device="cuda", dtype=torch.bfloat16)).next
        for m in (64, 65, 128, 256, 512, 1024, 2048):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ours = bench_queued(lambda: xopsaot.linear(x, w()))
            cublas = bench_queued(lambda: F.linear(x, w()))
            flops = 2 * m * n * k
            print(
                f"{m} x {k} -> {n}: ours {ours * 1e3:.1f} us {flops / ours / 1e9:.0f} TF, "
                f"F.linear {cublas * 1e3:.1f} us {flops / cublas / 1e9:.0f} TF, ratio {cublas / ours:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
