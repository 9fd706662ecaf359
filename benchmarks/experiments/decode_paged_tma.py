"""Paged decode against the contiguous cache, on the installed wheel: TB/s of KV read per decode step (automatic
splits, CUDA graphs), GQA 32:8, head dim 128, bf16, for the contiguous cache, the same cache as pages of one whole
sequence each (a table of one page per sequence: attn_decode_tma where the step has few programs), and pools of
pages of 16 and 128 in shuffled order (attention.py's layouts), at attention.py's decode shapes and others. With
--alternate K every attn_decode_tma bucket runs its K-th alternate (an autotune cache file that names it,
XOPSAOT_AUTOTUNE=1 in a child process), so its configs compare in one wheel.

    python3 benchmarks/experiments/decode_paged_tma.py LABEL [--alternate K]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def forced_cache(alternate: int) -> str:
    """An autotune cache file whose lines choose each attn_decode_tma bucket's alternate-th alternate."""
    import xopsaot
    from xopsaot import _library

    manifest, device = _library.manifest(), xopsaot.info()["devices"][0]["name"]
    lines = []
    for base in (v for v in manifest["variants"] if v["kernel"] == "attn_decode_tma" and v["alternate_of"] is None):
        alternates = [v for v in manifest["variants"] if v["alternate_of"] == base["index"]]
        if 1 <= alternate <= len(alternates):
            chosen = alternates[alternate - 1]
            lines.append(f"{device}\t{base['label']}\t{chosen['when']}\t{chosen['label']}\n")
    handle, path = tempfile.mkstemp(suffix=".tsv")
    os.write(handle, "".join(lines).encode())
    os.close(handle)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("label")
    parser.add_argument("--alternate", type=int, default=0)
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.alternate and not args.child:
        env = {**os.environ, "XOPSAOT_AUTOTUNE": "1", "XOPSAOT_AUTOTUNE_CACHE": forced_cache(args.alternate)}
        command = [sys.executable, __file__, args.label, "--alternate", str(args.alternate), "--child"]
        sys.exit(subprocess.run(command, env=env).returncode)

    import torch
    from attention import decode_step, kvcache_tbps, paged_view
    from run import warm_up_gpu

    from xopsaot import _library

    warm_up_gpu(1.0)
    for batch, context in SHAPES:
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        row = {"build": args.label, "alternate": args.alternate, "batch": batch, "context": context}
        row["contiguous"] = round(kvcache_tbps(q, kc, vc, lengths, nbytes), 3)
        # the contiguous cache as pages of a whole sequence each, behind a table of one page per sequence
        whole = torch.arange(batch, dtype=torch.int32, device="cuda").view(batch, 1)
        row["one_page"] = round(kvcache_tbps(q, kc, vc, lengths, nbytes, whole), 3)
        for page in (16, 128):
            kp, table = paged_view(kc, page)
            vp = paged_view(vc, page, table)[0]
            row[f"paged{page}"] = round(kvcache_tbps(q, kp, vp, lengths, nbytes, table), 3)
            row[f"paged{page}_variant"] = _library.manifest()["variants"][_library.last_variant()]["label"]
            del kp, vp
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
