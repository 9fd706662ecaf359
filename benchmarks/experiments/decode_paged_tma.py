"""Paged decode against the contiguous cache, on the installed wheel: TB/s of KV read per decode step (automatic splits,
CUDA graphs), GQA 32:8, head dim 128 (or --dim), bf16, for the contiguous cache, the same cache as pages of one whole
sequence each (a table of one page per sequence: attn_decode_tma where the step has few programs), and pools of pages of
16 and 128 in shuffled order (attention.py's layouts), at attention.py's decode shapes and others. With --alternate K
the attn_decode_tma bucket of bf16 queries at --dim runs its K-th alternate (an autotune cache file that names it,
XOPSAOT_AUTOTUNE=1 in a child process), so its configs compare in one wheel. --fp8: the same caches as float8_e4m3fn
(TB/s of their own, half as many, bytes; --alternate then picks from the fp8 cache's bucket). --queries N: chunks of N
queries (non-causal) in place of one; --dim: another head dim; --splits N: num_splits N (0, the default: the library's
choice).

    python3 benchmarks/experiments/decode_paged_tma.py LABEL [--alternate K] [--shapes I ...] [--fp8]
        [--queries N] [--dim D] [--splits N]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BUCKET = "attn_decode_tma/sm_90/bf16/{kv}/BLOCK_D={dim}/"  # the variants these shapes (bf16 queries) take
SHAPES = (
    (64, 8192),
    (16, 4096),
    (1, 32768),
    (1, 8192),
    (2, 4096),
    (4, 2048),
    (8, 8192),
    (32, 2048),
    (1, 131072),
    (1, 2048),
    (2, 16384),
)


def forced_env(alternate: int, kv: str, dim: int) -> dict:
    """The environment of a child that runs the alternate-th alternate of attn_decode_tma's bucket for bf16 queries
    and head dim `dim` (the one these shapes take), through run.py's forced_variant_env."""
    from run import forced_variant_env

    import xopsaot
    from xopsaot import _library

    bucket = BUCKET.format(kv=kv, dim=dim)
    variants = [v for v in _library.manifest()["variants"] if v["label"].startswith(bucket)]
    primary = next(v for v in variants if v["alternate_of"] is None)
    alternates = [v for v in variants if v["alternate_of"] == primary["index"]]
    return forced_variant_env(xopsaot.info()["devices"][0]["name"], primary, alternates[alternate - 1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("label")
    parser.add_argument("--alternate", type=int, default=0)
    parser.add_argument("--shapes", nargs="*", type=int, default=list(range(len(SHAPES))), help="indices in SHAPES")
    parser.add_argument("--fp8", action="store_true")
    parser.add_argument("--queries", type=int, default=1)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--splits", type=int, default=0, help="num_splits (0: the library's choice)")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.alternate and not args.child:
        env = forced_env(args.alternate, "e4m3" if args.fp8 else "bf16", args.dim)
        command = [sys.executable, __file__, args.label, "--alternate", str(args.alternate), "--child", "--shapes"]
        command += [str(i) for i in args.shapes] + ["--fp8"] * args.fp8
        command += ["--queries", str(args.queries), "--dim", str(args.dim), "--splits", str(args.splits)]
        sys.exit(subprocess.run(command, env=env).returncode)

    import torch
    from attention import decode_step, kvcache_tbps, paged_view
    from run import warm_up_gpu

    from xopsaot import _library

    warm_up_gpu(1.0)
    for batch, context in (SHAPES[i] for i in args.shapes):
        q, kc, vc, lengths, nbytes = decode_step(batch, context, dim=args.dim, queries=args.queries)
        cast = (lambda t: t.to(torch.float8_e4m3fn)) if args.fp8 else (lambda t: t)  # after paging: bf16 indexing
        nbytes = nbytes / 2 if args.fp8 else nbytes
        row = {"build": args.label, "alternate": args.alternate, "fp8": args.fp8, "batch": batch, "context": context}
        row |= {"queries": args.queries, "dim": args.dim, "splits": args.splits}
        row["contiguous"] = round(kvcache_tbps(q, cast(kc), cast(vc), lengths, nbytes, None, args.splits), 3)
        # the contiguous cache as pages of a whole sequence each, behind a table of one page per sequence
        whole = torch.arange(batch, dtype=torch.int32, device="cuda").view(batch, 1)
        row["one_page"] = round(kvcache_tbps(q, cast(kc), cast(vc), lengths, nbytes, whole, args.splits), 3)
        for page in (16, 128):
            kp, table = paged_view(kc, page)
            kp, vp = cast(kp), cast(paged_view(vc, page, table)[0])
            row[f"paged{page}"] = round(kvcache_tbps(q, kp, vp, lengths, nbytes, table, args.splits), 3)
            row[f"paged{page}_variant"] = _library.manifest()["variants"][_library.last_variant()]["label"]
            del kp, vp
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
