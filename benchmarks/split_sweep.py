"""Decode throughput against the split-KV slice count (num_splits), bf16, GQA 32:8, head dim 128, in CUDA graphs:
the sweep behind choose_splits in csrc/ops/attention.c. Prints one line per shape: TB/s of KV read for the
automatic choice and for each forced count. Shapes BATCHxCONTEXT (default: SHAPES).

    python benchmarks/split_sweep.py [BATCHxCONTEXT ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention import graph_ms  # noqa: E402

import xopsaot  # noqa: E402

SHAPES = ((16, 4096), (1, 32768), (64, 8192), (4, 8192), (32, 2048), (8, 16384), (2, 4096))
SPLITS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96, 128)


def main() -> None:
    shapes = [tuple(map(int, arg.split("x"))) for arg in sys.argv[1:]] or SHAPES
    for batch, context in shapes:
        q = torch.randn(batch, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
        kc, vc = (torch.randn(batch, context, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lengths = torch.full((batch,), context, dtype=torch.int32, device="cuda")
        gigabytes = 2 * kc.numel() * kc.element_size() / 1e9

        def tbps(splits: int) -> float:
            ms = graph_ms(lambda: xopsaot.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lengths,
                                                                   num_splits=splits, validate=False))  # fmt: skip
            return gigabytes / ms

        row = [(s, tbps(s)) for s in SPLITS if context / s >= 64]
        best = max(row, key=lambda r: r[1])
        print(f"b{batch} ctx{context}: auto {tbps(0):.2f} TB/s; best s={best[0]} {best[1]:.2f}; "
              + " ".join(f"{s}:{t:.2f}" for s, t in row), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
