"""Paged fp8 (float8_e4m3fn) caches in decode, through the installed wheel: TB/s of the cache's own bytes in CUDA
graphs, pages of 16 and 128 (shuffled tables), automatic split-KV and forced slice counts (k programs per
multiprocessor), the contiguous fp8 cache and the paged bf16 cache (pages of 16) beside. On the wheel of stop 30 a
paged fp8 cache read 0.68 of the contiguous fp8 cache at 16 x 4k. Run it under wheels whose paged decode config
differs (trial builds of kernels_src/attention_tuning.json) to compare configs. GQA 32:8, head dim 128 unless
given.

    python3 benchmarks/experiments/fp8_paged.py LABEL [HEAD_DIM]
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import decode_step, kvcache_tbps, paged_view, slices_per_sm  # noqa: E402
from run import warm_up_gpu  # noqa: E402

SHAPES = ((1, 32768), (2, 16384), (4, 8192), (8, 16384), (16, 4096), (64, 8192))
FP8 = torch.float8_e4m3fn


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "build"
    dim = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    warm_up_gpu(1.0)
    for batch, context in SHAPES:
        q, kc, vc, lengths, nbytes = decode_step(batch, context, dim=dim)
        caches = {"fp8": (kc.to(FP8), vc.to(FP8), None, nbytes / 2)}
        for page in (16, 128):
            kp, table = paged_view(kc, page)
            vp = paged_view(vc, page, table)[0]
            caches[f"fp8 p{page}"] = (kp.to(FP8), vp.to(FP8), table, nbytes / 2)
            if page == 16:
                caches["bf16 p16"] = (kp, vp, table, nbytes)
        cells = []
        for name, (k, v, table, size) in caches.items():
            for per_sm in (0, 2, 4):
                tbps = kvcache_tbps(q, k, v, lengths, size, table, slices_per_sm(per_sm, batch * 8))
                cells.append(f"{name} {per_sm or 'auto'}:{tbps:.2f}")
        print(f"{label} d{dim} b{batch}x{context}: " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
