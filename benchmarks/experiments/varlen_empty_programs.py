"""What the varlen prefill's empty programs cost. attn_fwd_ws's grid is (cdiv(max_seqlen_q, BLOCK_M), heads,
batch): every sequence gets max_seqlen_q's row blocks, and the programs past a sequence's own rows exit at once.
The benchmark's batch (benchmarks/attention.py varlen(): 12 sequences of 100-8192 tokens, 16 heads, head dim 128)
has 317 real row blocks of 128 per head against 12 x 63; this runs it with max_seqlen_q at its longest and at 2, 4
and 8 times that (the extra programs are all empty), so the time per empty program reads off the slope. Timed as
the committed table is (bench_sustained, ms per call), with the padded dense kernel once for the ratio.

    python3 benchmarks/experiments/varlen_empty_programs.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench_sustained, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


def main() -> None:
    warm_up_gpu()
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(100, 8193, (12,), generator=gen).tolist()
    heads, dim, block_m = 16, 128, 128
    cu = torch.tensor([0] + lengths, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    total, longest = sum(lengths), max(lengths)
    q, k, v = (torch.randn(total, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    dq, dk, dv = (torch.randn(len(lengths), longest, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    real_blocks = sum(-(-n // block_m) for n in lengths) * heads
    print("lengths", lengths, "real programs", real_blocks)
    for causal in (False, True):
        real = sum(4 * heads * n * n * dim for n in lengths) / (2 if causal else 1)
        padded = 4 * heads * len(lengths) * longest * longest * dim / (2 if causal else 1)
        dense_ms, _ = bench_sustained(lambda: xopsaot.flash_attn(dq, dk, dv, causal=causal))
        dense = padded / dense_ms / 1e9
        base = None
        for factor in (1, 2, 4, 8, 1):
            max_q = longest * factor
            fn = lambda m=max_q: xopsaot.flash_attn_varlen(q, k, v, cu, cu, m, longest, causal=causal,  # noqa: E731
                                                           validate=False)  # fmt: skip
            ms, state = bench_sustained(fn)
            programs = -(-max_q // block_m) * heads * len(lengths)
            empty = programs - real_blocks
            base = base or (ms, empty)
            slope = (ms - base[0]) * 1e3 / (empty - base[1]) if empty != base[1] else float("nan")
            print(
                f"causal={causal} max_seqlen_q={max_q}: {ms:.3f} ms, {programs} programs ({empty} empty), "
                f"{real / ms / 1e9:.0f} TFLOP/s real, ratio to dense {real / ms / 1e9 / dense:.3f} (dense {dense:.0f}"
                f"), us per extra empty program {slope:.4f}, {state['sm_mhz']:.0f} MHz",
                flush=True,
            )


if __name__ == "__main__":
    main()
