"""linear at decode batches (M = 1 to 16 rows, bf16, weight (N, K) K-contiguous) through the shipped matmul kernel
(kernels_src/matmul.py) in Triton's JIT at several tiles, against F.linear (cuBLAS) in the same run: TB/s of the
weight's bytes, the GPU time of queued calls. Each call reads the next of several weights (together well past the
50 MB L2), as a model's successive layers do, so no weight is served from L2.

    python3 benchmarks/experiments/skinny_linear.py [--rows 17,32,64] [--tiles 16,32,256,4,4;64,32,128,4,4]
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import Rotation, bench_queued, warm_up_gpu  # noqa: E402

from kernels_src.matmul import matmul_kernel  # noqa: E402

TILES = [  # BLOCK_M, BLOCK_N, BLOCK_K, warps, stages
    (128, 256, 64, 8, 3),  # the shipped sm_90 tile
    (16, 64, 128, 4, 4),
    (16, 32, 128, 4, 4),
    (16, 32, 256, 4, 3),
    (16, 32, 256, 4, 4),
    (16, 16, 256, 4, 4),
    (16, 64, 256, 4, 3),
    (16, 32, 512, 4, 2),
    (16, 32, 256, 8, 4),
]
SHAPES = [(4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (128256, 4096)]  # N, K


def launch(x, w, out, tile):
    bm, bn, bk, warps, stages = tile
    m, k = x.shape
    n = w.shape[0]
    grid = (-(-m // bm) * -(-n // bn),)
    matmul_kernel[grid](x, w, out, out, out, m, n, k, 0, x.stride(0), 0, w.stride(0), 0, out.stride(0), 0, 0, 0,
                        1.0, 0.0, 0, 0, 0, B_K_CONTIGUOUS=True, EPILOGUE=False, IEEE=False, BLOCK_M=bm, BLOCK_N=bn,
                        BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)  # fmt: skip


def option(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> None:
    global TILES
    if "--tiles" in sys.argv:
        TILES = [tuple(int(x) for x in t.split(",")) for t in option("--tiles", "").split(";")]
    row_counts = [int(m) for m in option("--rows", "1,4,16").split(",")]
    warm_up_gpu()
    print("M N K", "F.linear", *["/".join(map(str, t)) for t in TILES], sep="\t")
    for n, k in SHAPES:
        rot = Rotation(lambda n=n, k=k: torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5)
        for m in row_counts:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            ref = F.linear(x.double(), rot.tensors[0].double())
            cells = [f"{n * k * 2 / bench_queued(lambda: F.linear(x, rot.next())) / 1e9:.2f}"]
            for tile in TILES:
                out.fill_(float("nan"))
                launch(x, rot.tensors[0], out, tile)
                err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
                ms = bench_queued(lambda tile=tile: launch(x, rot.next(), out, tile))
                cells.append(f"{n * k * 2 / ms / 1e9:.2f}" + ("" if err < 1e-2 else f" (err {err:.0e})"))
            print(f"{m} {n} {k}", *cells, sep="\t", flush=True)


if __name__ == "__main__":
    main()
