"""What XOPSAOT_AUTOTUNE=1 gives on the GPU at hand: the attention shapes of benchmarks/attention.py timed with the
tuning table's configs and again in a fresh process that autotunes (fresh cache file), each in CUDA graphs.
Writes <out>/<device>-<date>-autotune.{json,md}.

    python benchmarks/autotune.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure() -> dict:
    """In this process (XOPSAOT_AUTOTUNE as the parent set it): milliseconds per call of each shape."""
    import torch

    sys.path.insert(0, str(HERE))
    from attention import graph_ms, paged_view

    import xopsaot

    bf16, times = torch.bfloat16, {}
    for batch, context in ((64, 8192), (16, 4096), (1, 32768)):
        q = torch.randn(batch, 1, 32, 128, device="cuda", dtype=bf16)
        kc, vc = (torch.randn(batch, context, 8, 128, device="cuda", dtype=bf16) for _ in range(2))
        lengths = torch.full((batch,), context, dtype=torch.int32, device="cuda")
        times[f"decode b{batch} ctx{context}"] = graph_ms(
            lambda: xopsaot.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lengths, validate=False)
        )
        kp, table = paged_view(kc, 16)
        vp, _ = paged_view(vc, 16, table)
        times[f"decode paged16 b{batch} ctx{context}"] = graph_ms(
            lambda: xopsaot.flash_attn_with_kvcache(q, kp, vp, cache_seqlens=lengths, block_table=table, validate=False)
        )
    for dim, heads in ((128, 16), (64, 32)):
        for causal in (False, True):
            q, k, v = (torch.randn(4, 4096, heads, dim, device="cuda", dtype=bf16) for _ in range(3))
            times[f"prefill hd{dim} 4k{' causal' if causal else ''}"] = graph_ms(
                lambda: xopsaot.flash_attn(q, k, v, causal=causal), calls=3
            )
    return times


def run_child(autotune: bool, cache: Path) -> dict:
    env = {**os.environ, "XOPSAOT_AUTOTUNE": "1" if autotune else "0", "XOPSAOT_AUTOTUNE_CACHE": str(cache)}
    out = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure()))
        return
    sys.path.insert(0, str(HERE))
    from run import environment, results_stem, write_results

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "autotune.tsv"
        table = run_child(False, cache)
        tuned = run_child(True, cache)
        choices = [line.split("\t") for line in cache.read_text().splitlines()] if cache.exists() else []
    env = environment()
    fields = ("device", "table", "bucket", "chosen")
    result = {
        "environment": env,
        "table_ms": table,
        "autotuned_ms": tuned,
        "choices": [dict(zip(fields, c)) for c in choices],
    }
    changed = [c for c in result["choices"] if c["table"] != c["chosen"]]
    lines = [
        f"# XOPSAOT_AUTOTUNE=1, {env['device']}, {env['date']}",
        "",
        f"torch {env['torch']}, xopsaot {env['xopsaot']}. bf16, GQA 32:8 decode and 4096-token prefill (batch 4),",
        "ms per call in CUDA graphs; each column from its own process, the autotuned one starting from an empty",
        f"cache. {len(result['choices'])} buckets were timed; {len(changed)} chose an alternate over the table.",
        "",
        "Command: `python benchmarks/autotune.py --out benchmarks/results`; raw numbers in the JSON beside this file.",
        "",
        "| shape | table (ms) | autotuned (ms) | table / autotuned |",
        "|---|---|---|---|",
    ]
    for name, ms in table.items():
        lines.append(f"| {name} | {ms:.4f} | {tuned[name]:.4f} | {ms / tuned[name]:.2f}x |")
    lines += ["", "Choices that differ from the table:", ""]
    lines += [f"- {c['table']} ({c['bucket'] or 'last bucket'}) -> {c['chosen']}" for c in changed] or ["- none"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        write_results(args.out, results_stem(env, "autotune"), result, text)


if __name__ == "__main__":
    main()
