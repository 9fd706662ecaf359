"""Prefill TFLOP/s of the installed xopsaot (bench's shapes), SDPA flash beside it when --peers. --sustained: one
bench_sustained timing per shape (0.5 s back to back, then 0.5 s timed) and the median SM clock, instead of two
short `bench` timings. --causal: the causal shapes only."""

import sys

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from attention import sdpa  # noqa: E402
from run import bench, bench_sustained, warm_up_gpu  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402

import xopsaot  # noqa: E402

warm_up_gpu() if callable(warm_up_gpu) else None
peers = "--peers" in sys.argv
for dim, heads in ((128, 16), (64, 32)):
    for seqlen in (4096, 8192, 16384):
        batch = max(1, 16384 // seqlen)
        q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (True,) if "--causal" in sys.argv else (False, True):
            flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
            if "--sustained" in sys.argv:
                ms, state = bench_sustained(lambda: xopsaot.flash_attn(q, k, v, causal=causal))
                ours = [flops / ms / 1e9]
                line = f"d{dim} n{seqlen} c={int(causal)}: ours {ours[0]:.0f} at {state.get('sm_mhz', 0):.0f} MHz"
            else:
                ours = [flops / bench(lambda: xopsaot.flash_attn(q, k, v, causal=causal), reps=30) / 1e9 for _ in "ab"]
                line = f"d{dim} n{seqlen} c={int(causal)}: ours {ours[0]:.0f} {ours[1]:.0f}"
            if peers:
                fl = flops / bench(lambda: sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION), reps=30) / 1e9
                line += f"  flash {fl:.0f}  ratio {max(ours) / fl:.2f}"
            print(line, flush=True)
