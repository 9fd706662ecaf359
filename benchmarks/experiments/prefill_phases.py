"""Where a warp-specialized prefill program's time goes: a wheel built with one of the patches beside this script
applied has the dense prefill kernel write, in place of the lse, each program's SM and the SM's cycle counter at its
phases (entry, setup done, queries landed, first key block landed, last product done, each consumer's store done,
exit). This script reads them back and prints the phases' medians, the time per key block, and the gaps between one
program's exit and the next one's entry on the same SM. `prefill_phases_device.diff` applies to 1a00d9e (attn_fwd_ws
making its descriptors in global scratch), `prefill_phases.diff` to the commit that added it (attn_fwd_ws_dense,
descriptors made on the host).

    python3 benchmarks/experiments/prefill_phases.py      (with that wheel installed)
"""

import sys

import numpy as np
import torch

sys.path.insert(0, "benchmarks")
from run import bench_queued as bench

import xopsaot

SHAPES = [  # head dim, heads, batch, seqlen, causal
    (64, 32, 4, 4096, True),
    (64, 32, 4, 4096, False),
    (64, 32, 1, 16384, True),
    (128, 16, 4, 4096, True),
    (128, 16, 4, 4096, False),
    (64, 32, 64, 256, False),
]
SLOTS = {"smid": 0, "entry": 1, "setup": 2, "exit": 3, "q": 4, "k0": 5, "loop": 6, "c0": 7, "c1": 8, "c2": 9}


def phases(dim, heads, batch, seqlen, causal):
    block_m = 192 if dim == 64 else 128
    q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
    ms = bench(lambda: xopsaot.flash_attn(q, k, v, causal=causal))
    for _ in range(3):  # the last call's stamps are read
        _, lse = xopsaot.flash_attn(q, k, v, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    words = lse.view(torch.int32).cpu().numpy().astype(np.int64)  # (batch, heads, seqlen)
    starts = np.arange(0, seqlen, block_m)
    w = np.stack([words[:, :, s : s + 13] for s in starts], axis=2).reshape(-1, 13)  # one row per program

    def rel(slot):  # cycles from the program's entry, signed (consumers may finish before consumer 0)
        return (w[:, SLOTS[slot]] - w[:, SLOTS["entry"]] + 2**31) % 2**32 - 2**31

    ns = (w[:, 12] - w[:, 11]) % 2**32
    ghz = np.median(rel("exit") / np.maximum(ns, 1))
    us = lambda c: c / ghz / 1e3  # noqa: E731
    blocks = w[:, 10]
    consumers = ["c0", "c1", "c2"][: 3 if dim == 64 else 2]
    last_store = np.max([rel(c) for c in consumers], axis=0)
    parts = [
        ("setup (entry -> before warp_specialize)", rel("setup")),
        ("queries land (-> consumer 0 sees Q)", rel("q") - rel("setup")),
        ("first key block (Q -> K0)", rel("k0") - rel("q")),
        ("key blocks (K0 -> last PV done)", rel("loop") - rel("k0")),
        ("epilogue of consumer 0 (-> stored)", rel("c0") - rel("loop")),
        ("the last consumer's store after consumer 0's", last_store - rel("c0")),
        ("join and exit (last store -> exit)", rel("exit") - last_store),
    ]
    total = rel("exit")
    print(f"\n== d{dim} h{heads} b{batch} s{seqlen} causal={causal}: {flops / ms / 1e9:.0f} TFLOP/s, "
          f"{ms * 1e3:.1f} us, {len(w)} programs, {ghz:.3f} GHz")  # fmt: skip
    print(f"program: median {np.median(us(total)):.2f} us, mean {np.mean(us(total)):.2f} us; "
          f"key blocks per program: mean {blocks.mean():.1f}")  # fmt: skip
    for name, c in parts:
        print(f"  {name:45s} median {np.median(us(c)):6.2f} us  mean {np.mean(us(c)):6.2f} us")
    loop = rel("loop") - rel("k0")
    per_block = loop[blocks > 1] / (blocks[blocks > 1] - 1)
    if len(per_block):
        print(f"  per key block after the first: median {np.median(us(per_block)):.3f} us")
    fixed = us(total - loop)
    print(f"  everything but the key-block loop: median {np.median(fixed):.2f} us, mean {np.mean(fixed):.2f} us")
    gaps = []
    for sm in np.unique(w[:, 0]):
        rows = w[w[:, 0] == sm]
        order = np.argsort((rows[:, 11] - rows[:, 11].min()) % 2**32)
        entry, exit_ = rows[order, 1], rows[order, 3]
        gaps.extend(((entry[1:] - exit_[:-1]) % 2**32).tolist())
    gaps = us(np.array(gaps, dtype=np.float64))
    print(f"  gap, one program's exit -> the next one's entry on its SM: median {np.median(gaps):.2f} us, "
          f"mean {np.mean(gaps):.2f} us, p90 {np.percentile(gaps, 90):.2f} us ({len(gaps)} gaps)")  # fmt: skip
    span = ((w[:, 12] - w[:, 11].min()) % 2**32).max() / 1e3
    busy = np.sum(ns) / 1e3 / len(np.unique(w[:, 0]))
    print(f"  kernel span {span:.1f} us (first entry to last exit); busy per SM {busy:.1f} us "
          f"({busy / span:.0%})")  # fmt: skip


for shape in SHAPES:
    phases(*shape)
