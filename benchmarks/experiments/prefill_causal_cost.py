"""Where head dim 64's causal prefill loses against its non-causal rate: a fit of sustained time (bench_sustained,
bf16, 32 heads, 16384 tokens per call at every length) to programs, 64 x 128 consumer blocks and masked ones.

A program of the shipped tile (192 x 128, three consumer warpgroups of 64 rows) costs o us outside its key blocks;
each consumer block u us; a block that a consumer masks (its diagonal's) x us more. Non-causal calls at 1k-16k
(no masked blocks: every length is a multiple of 128) give o and u by least squares; the causal calls' residual over
o and u, per masked block, gives x. Counts follow _attention_ws.py: tiles of BLOCK_M rows (the last one partial),
each consumer streaming the blocks up to its last row's diagonal.

    python3 benchmarks/experiments/prefill_causal_cost.py [rounds]
"""

import statistics
import sys

import numpy as np
import torch

sys.path.insert(0, "benchmarks")
from run import bench_sustained  # noqa: E402

import xopsaot  # noqa: E402

BLOCK_M, BLOCK_N, ROWS, HEADS, DIM, TOKENS, SMS = 192, 128, 64, 32, 64, 16384, 132


def counts(seqlen: int, causal: bool) -> tuple[int, int, int]:
    """(programs, consumer blocks, masked consumer blocks) of one call."""
    pairs = (TOKENS // seqlen) * HEADS
    programs = blocks = masked = 0
    for start in range(0, seqlen, BLOCK_M):
        programs += 1
        for row0 in range(start, min(start + BLOCK_M, seqlen), ROWS):
            last = min(row0 + ROWS, seqlen) - 1
            if not causal:
                blocks += -(-seqlen // BLOCK_N)
                continue
            blocks += last // BLOCK_N + 1
            masked += last // BLOCK_N - row0 // BLOCK_N + 1  # the blocks holding this consumer's diagonal
    return programs * pairs, blocks * pairs, masked * pairs


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
rows = []
for seqlen in (1024, 2048, 4096, 8192, 16384):
    q, k, v = (torch.randn(TOKENS // seqlen, seqlen, HEADS, DIM, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        ms = statistics.median(
            bench_sustained(lambda: xopsaot.flash_attn(q, k, v, causal=causal))[0] for _ in range(rounds)
        )
        flops = 4 * TOKENS * seqlen * HEADS * DIM / (2 if causal else 1)
        rows.append((seqlen, causal, ms * 1e3, *counts(seqlen, causal), flops / ms / 1e9))
        seq, c, us, programs, blocks, masked, tflops = rows[-1]
        print(f"L={seq:5d} causal={c:d} {us:8.1f} us  programs {programs:6d}  blocks {blocks:7d}  masked {masked:6d}  "
              f"{tflops:4.0f} TFLOP/s", flush=True)  # fmt: skip

# per multiprocessor: us * SMS = programs * o + blocks * u (+ masked * x)
plain = [r for r in rows if not r[1]]
a = np.array([[r[3], r[4]] for r in plain], float)
t = np.array([r[2] * SMS for r in plain])
(o, u), *_ = np.linalg.lstsq(a, t, rcond=None)
print(f"non-causal fit: o = {o:.2f} us a program, u = {u * 1e3:.1f} ns a consumer block")
for r in plain:
    print(f"  L={r[0]:5d}: measured {r[2]:8.1f} us, fit {(r[3] * o + r[4] * u) / SMS:8.1f}")
for r in (r for r in rows if r[1]):
    rest = r[2] * SMS - r[3] * o - r[4] * u
    share = rest / (r[2] * SMS)
    print(
        f"causal L={r[0]:5d}: {rest / r[5] * 1e3:7.1f} ns more a masked block ({share:.0%} of the time beyond the fit);"
        f" programs' o {r[3] * o / (r[2] * SMS):.0%}, blocks' u {r[4] * u / (r[2] * SMS):.0%}"
    )
