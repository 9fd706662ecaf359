"""Where lrpe_cosine's bandwidth stands against plain copies of the same shape of traffic: it reads x once and writes
twice as much ([x cos, x sin]). Times, in one process on the installed wheel (bf16, x (1, tokens, 32, 128), TB/s of
the bytes each moves once): lrpe_cosine; x copied to a tensor of its size (one read, one write); torch.cat([x, x], -1)
into a preallocated output (x read twice, the second time from L2, and twice its bytes written); zeroing a tensor of
the output's size (writes only).

    python3 benchmarks/experiments/lrpe_ceiling.py
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


def main() -> None:
    warm_up_gpu()
    print(json.dumps({"copy_1gb_tbps": round(copy_bandwidth(), 3)}))
    for tokens in (4096, 16384):
        x = torch.randn(1, tokens, 32, 128, device="cuda", dtype=torch.bfloat16)
        theta = torch.rand(32, 128, device="cuda")
        same, doubled = torch.empty_like(x), torch.empty(1, tokens, 32, 256, device="cuda", dtype=torch.bfloat16)
        n = x.numel() * x.element_size()
        cases = {
            "lrpe_cosine": (lambda: xopsaot.lrpe_cosine(x, theta), 3 * n),
            "copy (1 read, 1 write)": (lambda: same.copy_(x), 2 * n),
            "cat [x, x] (1 read, 2 writes)": (lambda: torch.cat([x, x], -1, out=doubled), 3 * n),
            "zero the output (2 writes)": (lambda: doubled.zero_(), 2 * n),
        }
        for name, (fn, nbytes) in cases.items():
            print(json.dumps({"tokens": tokens, "case": name, "tbps": round(nbytes / bench_queued(fn) / 1e9, 3)}))


if __name__ == "__main__":
    main()
