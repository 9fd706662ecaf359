"""What a prefill program costs: sequences of 128-1024 tokens (one to eight key blocks per program), queued
(`bench_queued`, so host time is out), against SDPA's flash and cuDNN backends; "us per wave" is the time over
programs / 132 multiprocessors.

    python3 benchmarks/experiments/short_programs.py
"""

import sys

sys.path.insert(0, "benchmarks")
import torch
from attention import sdpa
from run import bench_queued as bench
from torch.nn.attention import SDPBackend

import xopsaot

for dim, heads in ((64, 32), (128, 16)):
    for seqlen, batch in ((128, 64), (256, 32), (512, 16), (1024, 8)):
        q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * batch * heads * seqlen * seqlen * dim
        ours = min(bench(lambda: xopsaot.flash_attn(q, k, v)) for _ in range(2))
        fl = bench(lambda: sdpa(q, k, v, False, SDPBackend.FLASH_ATTENTION))
        cu = bench(lambda: sdpa(q, k, v, False, SDPBackend.CUDNN_ATTENTION))
        bm = 192 if dim == 64 else 128
        programs = batch * heads * -(-seqlen // bm)
        print(
            f"d{dim} s{seqlen} b{batch}: ours {ours * 1e3:.1f} us ({flops / ours / 1e9:.0f} TF/s, {programs} programs,"
            f" {ours * 1e3 / (programs / 132):.2f} us per wave) | flash {fl * 1e3:.1f} us | cudnn {cu * 1e3:.1f} us",
            flush=True,
        )
