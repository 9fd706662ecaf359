"""Stop 43 trial (benchmarks/experiments/prefill_two_per_sm.diff applied, sm_90 wheel): attn_fwd_ws_dense at head dim
64, the shipped 192 x 128 tile (one program per multiprocessor) against 128 x 64 tiles at two programs per
multiprocessor (PER_SM=2, 3 and 4 stages), each forced through an autotune cache file; sustained TFLOP/s, SM MHz, and
the largest error against SDPA (float32 math) on a slice. Two rounds.

    python3 benchmarks/experiments/prefill_two_per_sm.py
"""

import subprocess
import sys

sys.path.insert(0, "benchmarks")
from run import forced_variant_env  # noqa: E402

import xopsaot  # noqa: E402
from xopsaot import _library  # noqa: E402

CHILD = r"""
import sys
sys.path.insert(0, "benchmarks")
import torch, xopsaot
from run import bench_sustained
out = []
for seqlen in (4096, 8192, 16384):
    batch, heads, dim = max(1, 16384 // seqlen), 32, 64
    q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
        o = torch.full_like(q, float("nan"))
        o = xopsaot.flash_attn(q, k, v, causal=causal)
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(t[:1, :, :2].float().transpose(1, 2) for t in (q, k, v)), is_causal=causal).transpose(1, 2)
        err = (o[:1, :, :2].float() - ref).abs().max().item()
        ms, state = bench_sustained(lambda: xopsaot.flash_attn(q, k, v, causal=causal))
        out.append("%s%s %.0f@%.0f (%.0e)" % (seqlen // 1024, "c" if causal else "", flops / ms / 1e9,
                                             state.get("sm_mhz", 0), err))
print(" | ".join(out))
"""

m = _library.manifest()
dev = xopsaot.info()["devices"][0]["name"]
vs = [v for v in m["variants"] if v["label"].startswith("attn_fwd_ws_dense/sm_90/bf16/BLOCK_D=64/")]
prim = [v for v in vs if v["alternate_of"] is None][0]
picked = [prim] + [v for v in vs if "PER_SM=2" in v["label"]]
for _round in range(2):
    for v in picked:
        env = forced_variant_env(dev, prim, v)
        p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
        print(v["label"].split("/", 4)[4], "::", p.stdout.strip() or p.stderr[-800:], flush=True)
