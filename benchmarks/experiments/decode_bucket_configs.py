"""Every compiled config of a decode bucket (attn_fwd, bf16, BLOCK_M 16; paged caches' or contiguous ones'), each
forced through an autotune cache file (so the configs to compare must be listed as the bucket's alternates in
kernels_src/attention_tuning.json), on attention.py's decode shapes (GQA 32:8) in CUDA graphs: TB/s of KV read
for the contiguous cache and paged caches of 16 and 128 (shuffled tables), with automatic split-KV or the
`--splits` forced. Before timing, each config's output on sequences of awkward lengths (1, 17, 1000, 4097; with
and without splits) is compared with a float64 reference: the largest error is printed in brackets.

    python3 benchmarks/experiments/decode_bucket_configs.py [--dims 128 64 256] [--contiguous] [--splits 0 1]
"""

import argparse
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
from attention import DECODE_SHAPES, cache_layouts, decode_step, graph_ms
dim, heads, heads_k = int(sys.argv[1]), 32, 8
split_counts = [int(x) for x in sys.argv[2].split(",")]
torch.manual_seed(0)

def reference(q, kc, vc, lengths):
    # float64, per sequence, on the contiguous cache
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    group = heads // heads_k
    for b, n in enumerate(lengths.tolist()):
        k = kc[b, :n].double().repeat_interleave(group, dim=1)  # (n, heads, d)
        v = vc[b, :n].double().repeat_interleave(group, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b, 0].double(), k) / dim ** 0.5
        out[b, 0] = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v)
    return out

# correctness: awkward lengths, both page sizes, automatic and forced splits
worst = 0.0
lengths = torch.tensor([1, 17, 1000, 4097], dtype=torch.int32, device="cuda")
q = torch.randn(4, 1, heads, dim, device="cuda", dtype=torch.bfloat16)
kc, vc = (torch.randn(4, 4224, heads_k, dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
ref = reference(q, kc, vc, lengths)
for k, v, table in cache_layouts(kc, vc).values():
    for splits in (0, 1, 3):
        out = xopsaot.flash_attn_with_kvcache(q, k, v, cache_seqlens=lengths, block_table=table,
                                              num_splits=splits, validate=False)
        worst = max(worst, (out.double() - ref).abs().max().item())
line = []
for batch, context in DECODE_SHAPES:
    q, kc, vc, lengths, nbytes = decode_step(batch, context, heads, heads_k, dim)
    cells = []
    for name, (k, v, table) in cache_layouts(kc, vc).items():
        for splits in split_counts:
            ms = graph_ms(lambda: xopsaot.flash_attn_with_kvcache(q, k, v, cache_seqlens=lengths, block_table=table,
                                                                  num_splits=splits, validate=False))
            cells.append(f"{name}/{splits or 'auto'} {nbytes / ms / 1e9:.2f}")
    line.append(f"b{batch}x{context}: " + " ".join(cells))
print(f"({worst:.0e}) " + " | ".join(line))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dims", type=int, nargs="+", default=[128, 64, 256])
    parser.add_argument("--contiguous", action="store_true", help="force the contiguous cache's bucket")
    parser.add_argument("--splits", type=int, nargs="+", default=[0], help="num_splits to time (0: automatic)")
    args = parser.parse_args()
    m = _library.manifest()
    dev = xopsaot.info()["devices"][0]["name"]
    for dim in args.dims:
        prefix = f"attn_fwd/sm_90/bf16/bf16/BLOCK_D={dim}/PAGED={not args.contiguous}/MODS=False/BLOCK_M=16/"
        vs = [v for v in m["variants"] if v["label"].startswith(prefix)]
        prim = next(v for v in vs if v["alternate_of"] is None)
        print(f"d{dim} ({dev}):", flush=True)
        for v in vs:
            env = forced_variant_env(dev, prim, v)
            command = [sys.executable, "-c", CHILD, str(dim), ",".join(map(str, args.splits))]
            r = subprocess.run(command, env=env, capture_output=True, text=True)
            print("  ", v["label"][len(prefix) :], r.stdout.strip() or r.stderr[-800:], flush=True)


if __name__ == "__main__":
    main()
