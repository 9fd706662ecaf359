"""Packed prefill (flash_attn_varlen) against the padded dense kernel on the same sequences, in the installed
wheel: TFLOP/s on real tokens for varlen, on the padded batch for dense (as benchmarks/attention.py's varlen rows),
for several orders of the same lengths, so that a build which starts the longest sequences first
(benchmarks/experiments/varlen_schedule.diff, applied to 237a115) can be compared with one that takes them in batch
order. bf16, 16 heads at head dim 128 and 32 at 64; one JSON line per case.

    python3 benchmarks/experiments/varlen_order.py LABEL
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402

BF16 = torch.bfloat16


def benchmark_lengths() -> list[int]:
    """benchmarks/attention.py's twelve sequences of 100 to 8192 tokens."""
    gen = torch.Generator().manual_seed(0)
    return torch.randint(100, 8193, (12,), generator=gen).tolist()


def cases() -> list[tuple[str, list[int]]]:
    lengths = benchmark_lengths()
    mixed = torch.randint(64, 4097, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    return [
        ("benchmark order", lengths),
        ("ascending", sorted(lengths)),
        ("descending", sorted(lengths, reverse=True)),
        ("40 of 64-4096", mixed),
        ("two long last", [512] * 30 + [8192, 8192]),
    ]


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "build"
    warm_up_gpu()
    for dim in (128, 64):
        heads = 16 if dim == 128 else 32
        for name, lengths in cases():
            cu = torch.tensor([0] + lengths, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
            total, longest = sum(lengths), max(lengths)
            q, k, v = (torch.randn(total, heads, dim, device="cuda", dtype=BF16) for _ in range(3))
            dq, dk, dv = (torch.randn(len(lengths), longest, heads, dim, device="cuda", dtype=BF16) for _ in range(3))
            for causal in (False, True):
                real = sum(4 * heads * n * n * dim for n in lengths) / (2 if causal else 1)
                padded = 4 * heads * len(lengths) * longest * longest * dim / (2 if causal else 1)
                ours = bench(lambda: xopsaot.flash_attn_varlen(q, k, v, cu, cu, longest, longest, causal=causal,
                                                               validate=False), reps=20)  # fmt: skip
                dense = bench(lambda: xopsaot.flash_attn(dq, dk, dv, causal=causal), reps=20)
                row = {"build": label, "dim": dim, "case": name, "causal": causal, "varlen_ms": round(ours, 4),
                       "varlen_tflops": round(real / ours / 1e9, 1), "dense_tflops": round(padded / dense / 1e9, 1),
                       "ratio": round(real / ours / (padded / dense), 3)}  # fmt: skip
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
