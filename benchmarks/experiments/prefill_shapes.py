"""Sustained prefill TFLOP/s of the installed xopsaot at the shapes named on the command line, each as
DIM:SEQLEN:BATCH:HEADS:CAUSAL (bf16, equal query and key lengths; e.g. 64:4224:4:33:0, whose 22 row blocks of 192 a
head make 22 full rounds of 132 programs). Run from the repository root, once per wheel (PYTHONPATH), in one device
call, to compare builds on the same machine state.

    python benchmarks/experiments/prefill_shapes.py 64:4096:4:32:1 64:4224:4:33:0 ...
"""

import sys

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from run import bench_sustained  # noqa: E402

import xopsaot  # noqa: E402

for spec in sys.argv[1:]:
    dim, seqlen, batch, heads, causal = (int(x) for x in spec.split(":"))
    q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
    ms, state = bench_sustained(lambda: xopsaot.flash_attn(q, k, v, causal=bool(causal)))
    print(f"{spec}: {flops / ms / 1e9:.0f} TFLOP/s at {state.get('sm_mhz', 0):.0f} MHz", flush=True)
