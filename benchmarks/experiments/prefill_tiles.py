"""Every compiled tile of one Hopper prefill kernel and head dim (its table config and each alternate), forced through
an autotune cache file, at 4k-16k causal and not: sustained TFLOP/s (bench_sustained), SM MHz, and the largest error
against SDPA (float32 math) on a slice; SDPA's flash backend timed the same way in each round for reference.

    python3 benchmarks/experiments/prefill_tiles.py [head_dim] [rounds] [seqlens]    (default: 64 2 4096,8192,16384)

Stop 44 ran it on trial wheels whose table listed 128 x 128 tiles (2 and 3 stages) as head dim 64's alternates, and
two row blocks a program as the config (benchmarks/experiments/prefill_two_tiles.diff), and on the shipped wheel.
Run it from the repository's root.
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
from torch.nn.attention import SDPBackend, sdpa_kernel
from run import bench_sustained
dim, seqlens, peer = int(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")], sys.argv[3] == "flash"
out = []
for seqlen in seqlens:
    batch, heads = max(1, 16384 // seqlen), 2048 // dim
    q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
        if peer:
            def fn():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return torch.nn.functional.scaled_dot_product_attention(
                        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
            err = 0.0
        else:
            fn = lambda: xopsaot.flash_attn(q, k, v, causal=causal)
            o = fn()
            ref = torch.nn.functional.scaled_dot_product_attention(
                *(t[:1, :, :2].float().transpose(1, 2) for t in (q, k, v)), is_causal=causal).transpose(1, 2)
            err = (o[:1, :, :2].float() - ref).abs().max().item()
        ms, state = bench_sustained(fn)
        out.append("%s%s %.0f@%.0f (%.0e)" % (seqlen // 1024, "c" if causal else "", flops / ms / 1e9,
                                             state.get("sm_mhz", 0), err))
print(" | ".join(out))
"""

dim = sys.argv[1] if len(sys.argv) > 1 else "64"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
seqlens = sys.argv[3] if len(sys.argv) > 3 else "4096,8192,16384"
m = _library.manifest()
dev = xopsaot.info()["devices"][0]["name"]
vs = [v for v in m["variants"] if v["label"].startswith(f"attn_fwd_ws_dense/sm_90/bf16/BLOCK_D={dim}/")]
primary = next(v for v in vs if v["alternate_of"] is None)
picked = [primary] + [v for v in vs if v["alternate_of"] == primary["index"]]
for _round in range(rounds):
    for v in [*picked, None]:
        env = forced_variant_env(dev, primary, v or primary)
        args = [sys.executable, "-c", CHILD, dim, seqlens, "flash" if v is None else "ours"]
        p = subprocess.run(args, env=env, capture_output=True, text=True)
        name = "SDPA flash" if v is None else v["label"].split("/", 4)[4]
        print(name, "::", p.stdout.strip() or p.stderr[-800:], flush=True)
