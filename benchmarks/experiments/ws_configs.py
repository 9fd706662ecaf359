"""Time every compiled attn_fwd_ws config (bf16) on the prefill shapes, each forced through an autotune cache file
(needs the configs to compare listed as ws_tiles alternates in kernels_src/attention_tuning.json), with its
largest error against SDPA on a slice in brackets.

    python3 benchmarks/experiments/ws_configs.py
"""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import forced_variant_env  # noqa: E402

import xopsaot  # noqa: E402
from xopsaot import _library  # noqa: E402

CHILD = r"""
import sys
sys.path.insert(0, "benchmarks")
import torch, xopsaot
from run import bench
dim = int(sys.argv[1]); heads = 4096 // dim
out = []
for seqlen in (4096, 8192, 16384):
    batch = max(1, 16384 // seqlen)
    q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
        ms = min(bench(lambda: xopsaot.flash_attn(q, k, v, causal=causal), reps=30) for _ in range(2))
        # the largest error against SDPA on the first two heads (a config that computes wrong shows here)
        o = xopsaot.flash_attn(q, k, v, causal=causal)[:1, :, :2]
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(t[:1, :, :2].transpose(1, 2) for t in (q, k, v)), is_causal=causal
        ).transpose(1, 2)
        out.append("%.0f (%.0e)" % (flops / ms / 1e9, (o.float() - ref.float()).abs().max().item()))
print(" ".join(out))
"""

m = _library.manifest()
dev = xopsaot.info()["devices"][0]["name"]
by = {v["index"]: v for v in m["variants"]}
for dim in (64, 128):
    vs = [v for v in m["variants"] if v["label"].startswith(f"attn_fwd_ws/sm_90/bf16/BLOCK_D={dim}/")]
    prim = [v for v in vs if v["alternate_of"] is None][0]
    print(f"d{dim}: seqlen 4k 4k-causal 8k 8k-causal 16k 16k-causal", flush=True)
    for v in vs:
        env = forced_variant_env(dev, prim, v)
        r = subprocess.run([sys.executable, "-c", CHILD, str(dim)], env=env, capture_output=True, text=True)
        print("  ", v["label"].split("/", 4)[4], r.stdout.strip() or r.stderr[-500:], flush=True)
