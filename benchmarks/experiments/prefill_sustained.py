"""Prefill TFLOP/s over a sustained run: each contender called back to back for SECONDS, timed in chunks of 20
calls with CUDA events, so that clock and power changes show as a drift across chunks. Prints wall-clock stamps
that line up with an `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,... -lms 50` log run beside it.

    python3 benchmarks/experiments/prefill_sustained.py [SECONDS]
"""

import statistics
import sys
import time

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from attention import sdpa  # noqa: E402
from run import warm_up_gpu  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402

import xopsaot  # noqa: E402

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
CHUNK = 20


def chunks(fn, seconds):
    """TFLOP-free timings: milliseconds per call of each chunk of CHUNK calls, for `seconds` of wall time."""
    out = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(CHUNK):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / CHUNK)
    return out


warm_up_gpu()
SHAPES = ((64, 32, 4096, False), (64, 32, 4096, True), (64, 32, 8192, False), (128, 16, 4096, False))
for dim, heads, seqlen, causal in SHAPES:
    batch = max(1, 16384 // seqlen)
    q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
    fns = {
        "ours": lambda: xopsaot.flash_attn(q, k, v, causal=causal),
        "flash": lambda: sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION),
        "cudnn": lambda: sdpa(q, k, v, causal, SDPBackend.CUDNN_ATTENTION),
    }
    for name, fn in fns.items():
        fn()
        torch.cuda.synchronize()
        t0 = time.time()
        ms = chunks(fn, SECONDS)
        tf = [flops / m / 1e9 for m in ms]
        n = len(tf)
        head = " ".join(f"{x:.0f}" for x in tf[:6])
        print(
            f"d{dim} n{seqlen} c={int(causal)} {name:5s} t={t0:.2f}-{time.time():.2f}: chunks {n}, first {head}; "
            f"median first quarter {statistics.median(tf[: max(1, n // 4)]):.0f}, "
            f"last half {statistics.median(tf[n // 2 :]):.0f}, min {min(tf):.0f}, max {max(tf):.0f}",
            flush=True,
        )
