"""Device microseconds per sample() call of the installed xopsaot (attention.py's graph_ms: 20 calls in a CUDA graph),
bf16 logits of 128256 tokens, by batch and filter: run once per wheel in one device call to compare builds. Rows no
filter touches (temperature only, or greedy), at most one per two multiprocessors, take the split path
(sample_chunks_kernel, then sample_pick_kernel); the others sample_kernel.

    python benchmarks/experiments/sample_chunks.py [--host]    (from the repository root)

--host: host microseconds per call instead (300 calls at batch 1, perf_counter; the GPU keeps up, so the calls
are bound by the host): a fixed seed, a filtered call, a fresh seed per call, greedy, and torch.argmax beside.

Stop 45's runs (h100-2026-11-27-sample-stop45.txt) timed each graph's replays with their own events, median of 10.
"""

import sys
import time

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from attention import graph_ms  # noqa: E402

import xopsaot  # noqa: E402

SETTINGS = ((1.0, None, None), (0.0, None, None), (0.7, 50, None), (0.7, None, 0.9), (0.7, 50, 0.9))


def host_us() -> None:
    logits = torch.randn(1, 128256, device="cuda", dtype=torch.bfloat16)
    calls = (
        ("sample T=1", lambda: xopsaot.sample(logits, 1.0, seed=1)),
        ("sample k50 p0.9", lambda: xopsaot.sample(logits, 0.7, 50, 0.9, seed=1)),
        ("sample T=1 seed None", lambda: xopsaot.sample(logits, 1.0)),
        ("sample greedy seed None", lambda: xopsaot.sample(logits, 0.0)),
        ("torch.argmax", lambda: torch.argmax(logits, -1)),
    )
    for name, fn in calls:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(300):
            fn()
        host = (time.perf_counter() - start) / 300 * 1e6
        torch.cuda.synchronize()
        total = (time.perf_counter() - start) / 300 * 1e6
        print(f"{name}: host {host:.1f} us per call, with the queue drained {total:.1f}", flush=True)


def main() -> None:
    if "--host" in sys.argv:
        host_us()
        return
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
