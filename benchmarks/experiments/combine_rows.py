"""Split decode steps with many combine rows and few slices, through the installed wheel (num_splits forced, CUDA
graphs, TB/s of KV read): where attn_combine has the most programs and the fewest slices each, the case a tile of 32
slices could cost most against a loop over the slices (benchmarks/experiments/combine_chunks.py measured a JIT tile
of 32 slices at 8.9 us against the loop's 3.8 at 2048 rows of 2 slices, in stop 13). Compare wheels by running it
under each. GQA 32:8, head dim 128, bf16 contiguous and fp8 caches.

    python3 benchmarks/experiments/combine_rows.py LABEL
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import decode_step, kvcache_tbps  # noqa: E402
from run import warm_up_gpu  # noqa: E402

STEPS = ((64, 8192, 2), (64, 2048, 2), (32, 4096, 2), (32, 4096, 4), (16, 4096, 4), (16, 4096, 8), (4, 8192, 32))


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "build"
    warm_up_gpu(1.0)
    for batch, context, splits in STEPS:
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        k8, v8 = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
        cells = []
        for name, k, v, size in (("bf16", kc, vc, nbytes), ("fp8", k8, v8, nbytes / 2)):
            cells.append(f"{name} {kvcache_tbps(q, k, v, lengths, size, splits=splits):.2f}")
        print(f"{label} b{batch}x{context} rows {batch * 32} splits {splits}: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
