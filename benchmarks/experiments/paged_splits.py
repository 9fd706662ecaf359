"""Decode through the shipped library against a forced num_splits, contiguous and paged (16, 128; shuffled tables)
caches, GQA 32:8, head dim 128, bf16, CUDA graphs: TB/s of KV read.

    python3 benchmarks/experiments/paged_splits.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import cache_layouts, decode_step, kvcache_tbps  # noqa: E402
from run import warm_up_gpu  # noqa: E402

SHAPES = ((1, 32768, (0, 8, 12, 16, 20, 24, 33, 48)), (16, 4096, (0, 1, 2, 3)), (4, 8192, (0, 4, 6, 8, 12)))


def main() -> None:
    warm_up_gpu(1.0)
    for batch, context, split_counts in SHAPES:
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        for name, (k, v, table) in cache_layouts(kc, vc).items():
            line = []
            for splits in split_counts:
                line.append(f"{splits or 'auto'}:{kvcache_tbps(q, k, v, lengths, nbytes, table, splits):.2f}")
            print(f"b{batch}x{context} {name}: " + " ".join(line), flush=True)


if __name__ == "__main__":
    main()
