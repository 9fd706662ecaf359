"""Decode with automatic split-KV at batch x key heads that leave the GPU's multiprocessors idle, in the installed
wheel: TB/s of KV read in CUDA graphs for the contiguous cache, paged caches of 16 and 128 (shuffled tables), the
contiguous cache in float8_e4m3fn (TB/s of its own, half as many, bytes) and SDPA (enable_gqa), GQA 32:8, head dim
128, bf16. Compares builds whose ONE_WAVE buckets serve unsplit steps only
with builds that also serve split ones (as many slices as make one wave). One line per shape; shapes
BATCHxCONTEXT (default: SHAPES).

    python3 benchmarks/experiments/decode_waves.py LABEL [BATCHxCONTEXT ...]
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import cache_layouts, decode_step, graph_ms, kvcache_tbps, sdpa  # noqa: E402
from run import warm_up_gpu  # noqa: E402

SHAPES = ((1, 32768), (1, 8192), (2, 4096), (2, 16384), (4, 8192), (4, 2048), (8, 16384), (16, 4096))


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "build"
    warm_up_gpu(1.0)
    shapes = [tuple(map(int, arg.split("x"))) for arg in sys.argv[2:]] or SHAPES
    for batch, context in shapes:
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        cells = [f"sdpa {nbytes / graph_ms(lambda: sdpa(q, kc, vc, False)) / 1e9:.2f}"]
        for name, (k, v, table) in cache_layouts(kc, vc).items():
            cells.append(f"{name} {kvcache_tbps(q, k, v, lengths, nbytes, table):.2f}")
        k8, v8 = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
        cells.append(f"fp8 {kvcache_tbps(q, k8, v8, lengths, nbytes / 2):.2f}")
        print(f"{label} b{batch}x{context}: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
