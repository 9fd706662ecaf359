"""Device microseconds per sample() call of the installed xopsaot (attention.py's graph_ms: 20 calls in a CUDA graph),
bf16 logits of 128256 tokens, by batch and filter: run once per wheel in one device call to compare builds. Rows no
filter touches (temperature only, or greedy), at most one per two multiprocessors, take the split path
(sample_chunks_kernel, then sample_pick_kernel); the others sample_kernel.

    python benchmarks/experiments/sample_chunks.py    (from the repository root)

Stop 45's runs (h100-2026-11-27-sample-stop45.txt) timed each graph's replays with their own events, median of 10.
"""

import sys

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from attention import graph_ms  # noqa: E402

import xopsaot  # noqa: E402

SETTINGS = ((1.0, None, None), (0.0, None, None), (0.7, 50, None), (0.7, None, 0.9), (0.7, 50, 0.9))


def main() -> None:
    torch.manual_seed(0)
    for batch in (1, 8, 64, 131, 132, 256, 1024):
        logits = torch.randn(batch, 128256, device="cuda", dtype=torch.bfloat16) * 3
        cells = []
        for temperature, top_k, top_p in SETTINGS:
            us = 1e3 * graph_ms(lambda: xopsaot.sample(logits, temperature, top_k, top_p, seed=1), 20)  # noqa: B023
            cells.append(f"T={temperature} k={top_k} p={top_p}: {us:.1f}")
        print(f"batch {batch}: " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
