"""The attention family on a CUDA GPU against its peers, measured in the same run: prefill (SDPA flash and cuDNN
backends), decode against a KV cache (SDPA with enable_gqa; contiguous and paged caches), varlen against the
padded dense kernel. Writes <out>/<device>-<date>-attention-family.{json,md}.

    python benchmarks/attention.py --out benchmarks/results [--quick]
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import bench, copy_bandwidth, environment, results_stem, timed, warm_up_gpu, write_results  # noqa: E402

import xopsaot  # noqa: E402

BF16 = torch.bfloat16


def sdpa(q, k, v, causal, backend=None):
    args = (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    if backend is None:
        return F.scaled_dot_product_attention(*args, is_causal=causal, enable_gqa=k.shape[2] != q.shape[2])
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(*args, is_causal=causal)


def prefill(quick: bool) -> list[dict]:
    rows = []
    for dim, heads in ((128, 16), (64, 32)):
        for seqlen in (4096, 8192) if quick else (4096, 8192, 16384):
            batch = max(1, 16384 // seqlen)
            q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=BF16) for _ in range(3))
            for causal in (False, True):
                flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
                row = {"dim": dim, "seqlen": seqlen, "batch": batch, "heads": heads, "causal": causal}
                timed(row, "xopsaot", lambda: xopsaot.flash_attn(q, k, v, causal=causal))
                for name, backend in (
                    ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                    ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                ):
                    try:
                        timed(row, name, lambda: sdpa(q, k, v, causal, backend))
                    except RuntimeError:
                        pass
                for key in [k for k in row if k.endswith("_ms")]:
                    row[key.replace("_ms", "_tflops")] = flops / row[key] / 1e9
                rows.append(row)
                peer = f"flash {row.get('sdpa_flash_tflops', 0):.0f}, cudnn {row.get('sdpa_cudnn_tflops', 0):.0f}"
                print(f"prefill d{dim} n{seqlen} causal={causal}: {row['xopsaot_tflops']:.0f} TFLOP/s, {peer}")
    return rows


def captured(fn, calls: int = 10) -> torch.cuda.CUDAGraph:
    """`calls` calls of fn captured in one CUDA graph (after one call outside it, which loads what fn needs)."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def graph_ms(fn, calls: int = 10) -> float:
    """Milliseconds per call when `calls` calls are captured in one CUDA graph and replayed: the kernels' time
    without the host's launch cost (how servers run decode steps)."""
    return bench(captured(fn, calls).replay) / calls


def paged_view(cache: torch.Tensor, page: int, table: torch.Tensor | None = None):
    """The contiguous cache (batch, capacity, hk, d) copied into a pool of pages in shuffled order + its table: a
    new permutation, or `table`'s (for the values of the same keys, or the same cache in another dtype)."""
    batch, capacity = cache.shape[:2]
    per = capacity // page
    if table is None:
        table = torch.randperm(batch * per, device="cuda").view(batch, per).to(torch.int32)
    pool = torch.empty(batch * per, page, *cache.shape[2:], device="cuda", dtype=cache.dtype)
    pool[table.view(-1).long()] = cache.reshape(batch * per, page, *cache.shape[2:])
    return pool, table


DECODE_SHAPES = ((64, 8192), (16, 4096), (1, 32768))  # (batch, context)
# Batches between the waves (8 key heads: 96-192 programs on 132 multiprocessors), where split counts and kernel
# choice matter most and the three shapes above say nothing
BETWEEN_WAVES = ((12, 8192), (17, 4096), (20, 4096), (24, 8192), (18, 16384))


def decode_step(batch: int, context: int, heads: int = 32, heads_k: int = 8, dim: int = 128, queries: int = 1):
    """One decode step's inputs: q (batch, queries, heads, dim) and full bf16 caches (batch, context, heads_k, dim)
    of random data, cache_seqlens, and the caches' bytes (keys and values)."""
    q = torch.randn(batch, queries, heads, dim, device="cuda", dtype=BF16)
    kc, vc = (torch.randn(batch, context, heads_k, dim, device="cuda", dtype=BF16) for _ in range(2))
    lengths = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    return q, kc, vc, lengths, 2 * kc.numel() * kc.element_size()


def kvcache_tbps(q, k, v, lengths, nbytes: float, table=None, splits: int = 0) -> float:
    """TB/s of flash_attn_with_kvcache's decode step over caches of `nbytes` (keys and values), in CUDA graphs
    (graph_ms); `splits` 0 lets the library choose."""
    options = {"cache_seqlens": lengths, "block_table": table, "num_splits": splits, "validate": False}
    return nbytes / graph_ms(lambda: xopsaot.flash_attn_with_kvcache(q, k, v, **options)) / 1e9


def slices_per_sm(per_sm: int, programs: int) -> int:
    """The num_splits that makes `per_sm` programs per multiprocessor of a step with `programs` per slice (batch x
    key heads in decode), within attn_combine's 128; 0 (the library's choice) for per_sm 0."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return min(128, max(1, per_sm * sms // programs)) if per_sm else 0


def cache_layouts(kc: torch.Tensor, vc: torch.Tensor) -> dict:
    """name -> (k_cache, v_cache, block_table): the contiguous caches, then paged copies of them with pages of 16
    and 128 tokens (shuffled tables, one per page size, shared by keys and values)."""
    layouts = {"contiguous": (kc, vc, None)}
    for page in (16, 128):
        kp, table = paged_view(kc, page)
        layouts[f"paged{page}"] = (kp, paged_view(vc, page, table)[0], table)
    return layouts


def decode(quick: bool) -> list[dict]:
    rows = []
    heads, heads_k, dim = 32, 8, 128
    for batch, context in DECODE_SHAPES:
        q, kc, vc, lengths, kv_bytes = decode_step(batch, context, heads, heads_k, dim)
        row = {"batch": batch, "context": context, "heads": heads, "heads_k": heads_k, "dim": dim}
        calls = {"sdpa_gqa": lambda: sdpa(q, kc, vc, False)}
        for name, (k, v, table) in cache_layouts(kc, vc).items():
            options = {"cache_seqlens": lengths, "block_table": table, "validate": False}
            calls["xopsaot" if table is None else name] = partial(xopsaot.flash_attn_with_kvcache, q, k, v, **options)
        # the same cache in fp8 e4m3 (half the bytes), per-tensor scales
        k8, v8 = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
        calls["fp8"] = lambda: xopsaot.flash_attn_with_kvcache(
            q, k8, v8, cache_seqlens=lengths, k_scale=1.0, v_scale=1.0, validate=False
        )
        for name, fn in calls.items():
            row[f"{name}_ms"] = bench(fn)
            row[f"{name}_graph_ms"] = graph_ms(fn)
        for key in [k for k in row if k.endswith("_ms")]:
            row[key.replace("_ms", "_tbps")] = kv_bytes / (2 if key.startswith("fp8") else 1) / row[key] / 1e9
        rows.append(row)
        print(f"decode b{batch} ctx{context} (graphs): {row['xopsaot_graph_tbps']:.2f} TB/s, paged16 "
              f"{row['paged16_graph_tbps']:.2f}, paged128 {row['paged128_graph_tbps']:.2f}, "
              f"sdpa gqa {row['sdpa_gqa_graph_tbps']:.2f}, fp8 cache {row['fp8_graph_tbps']:.2f} "
              f"({row['xopsaot_graph_ms'] / row['fp8_graph_ms']:.2f}x faster)")  # fmt: skip
    return rows


def decode_between_waves(quick: bool) -> list[dict]:
    """BETWEEN_WAVES in CUDA graphs: TB/s of the contiguous and paged caches (automatic slices) and SDPA."""
    rows = []
    for batch, context in BETWEEN_WAVES[:2] if quick else BETWEEN_WAVES:
        q, kc, vc, lengths, kv_bytes = decode_step(batch, context)
        row = {
            "batch": batch,
            "context": context,
            "sdpa_gqa_graph_tbps": kv_bytes / graph_ms(lambda: sdpa(q, kc, vc, False)) / 1e9,
        }
        for name, (k, v, table) in cache_layouts(kc, vc).items():
            row[f"{name}_graph_tbps"] = kvcache_tbps(q, k, v, lengths, kv_bytes, table)
        rows.append(row)
        speeds = ", ".join(f"{k.removesuffix('_graph_tbps')} {v:.2f}" for k, v in row.items() if k.endswith("_tbps"))
        print(f"decode b{batch} ctx{context} (graphs): {speeds}")
    return rows


def varlen() -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(100, 8193, (12,), generator=gen).tolist()
    heads, dim = 16, 128
    cu = torch.tensor([0] + lengths, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    total, longest = sum(lengths), max(lengths)
    q, k, v = (torch.randn(total, heads, dim, device="cuda", dtype=BF16) for _ in range(3))
    dq, dk, dv = (torch.randn(len(lengths), longest, heads, dim, device="cuda", dtype=BF16) for _ in range(3))
    rows = []
    for causal in (False, True):
        real = sum(4 * heads * n * n * dim for n in lengths) / (2 if causal else 1)
        padded = 4 * heads * len(lengths) * longest * longest * dim / (2 if causal else 1)
        row = {"lengths": lengths, "causal": causal}
        timed(row, "varlen", lambda: xopsaot.flash_attn_varlen(q, k, v, cu, cu, longest, longest, causal=causal,
                                                                validate=False))  # fmt: skip
        timed(row, "dense_padded", lambda: xopsaot.flash_attn(dq, dk, dv, causal=causal))
        row["varlen_tflops"] = real / row["varlen_ms"] / 1e9
        row["dense_tflops"] = padded / row["dense_padded_ms"] / 1e9
        rows.append(row)
        print(f"varlen causal={causal}: {row['varlen_tflops']:.0f} TFLOP/s on real tokens; padded dense "
              f"{row['dense_tflops']:.0f}")  # fmt: skip
    return rows


def markdown(r: dict) -> str:
    env = r["environment"]
    lines = [
        f"# Attention family, {env['device']}, {env['date']}",
        "",
        f"torch {env['torch']}, CUDA {env['cuda']}, driver {env['driver']}, xopsaot {env['xopsaot']} (built with "
        f"Triton {env['xopsaot_built_with_triton']}). Copy bandwidth {r['copy_tbps']:.2f} TB/s.",
        "",
        "Command: `python benchmarks/attention.py --out benchmarks/results`; raw numbers in the JSON beside this file.",
        "",
        "## Prefill (bf16, TFLOP/s; causal counts half the FLOPs)",
        "",
        "Each kernel runs back to back for 0.5 s before 0.5 s of timed calls (median of CUDA events per call), so it",
        "is timed where the 700 W power cap holds the clock under sustained load, not in the transient left by what",
        "ran before; SM clock (MHz) as nvidia-smi sampled it during the timed calls.",
        "",
        "| head dim | causal | seqlen | batch x heads | xopsaot | SDPA flash | SDPA cuDNN | vs flash | vs cuDNN "
        "| clock: xopsaot / flash / cuDNN |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r["prefill"]:
        flash, cudnn = x.get("sdpa_flash_tflops", float("nan")), x.get("sdpa_cudnn_tflops", float("nan"))
        clocks = " / ".join(
            f"{x.get(f'{key}_sm_mhz', float('nan')):.0f}" for key in ("xopsaot", "sdpa_flash", "sdpa_cudnn")
        )
        lines.append(
            f"| {x['dim']} | {x['causal']} | {x['seqlen']} | {x['batch']} x {x['heads']} | {x['xopsaot_tflops']:.0f} "
            f"| {flash:.0f} | {cudnn:.0f} | {x['xopsaot_tflops'] / flash:.2f}x | {x['xopsaot_tflops'] / cudnn:.2f}x "
            f"| {clocks} |"
        )
    lines += [
        "",
        "## Decode (q length 1, GQA 32:8, head dim 128, bf16; TB/s counting the KV bytes read once)",
        "",
        "graph: ten calls captured in a CUDA graph and replayed (the kernels' time, as servers run decode steps);",
        "eager: one Python call after another (includes the host's launch cost where it exceeds the kernels' time).",
        "",
        "fp8 cache: the same cache as float8_e4m3fn, TB/s of its own (half as many) bytes, and its time against",
        "the bf16 cache's.",
        "",
        "| batch | context | mode | xopsaot | paged 16 | paged 128 | SDPA gqa | vs SDPA | paged 16 / contiguous "
        "| fp8 cache | fp8 speedup |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r["decode"]:
        for mode, suffix in (("graph", "_graph_tbps"), ("eager", "_tbps")):
            ours, peer = x["xopsaot" + suffix], x["sdpa_gqa" + suffix]
            fp8 = x.get("fp8" + suffix, float("nan"))
            lines.append(
                f"| {x['batch']} | {x['context']} | {mode} | {ours:.2f} | {x['paged16' + suffix]:.2f} | "
                f"{x['paged128' + suffix]:.2f} | {peer:.2f} | {ours / peer:.2f}x | {x['paged16' + suffix] / ours:.2f} "
                f"| {fp8:.2f} | {2 * fp8 / ours:.2f}x |"
            )
    if r.get("decode_between_waves"):
        lines += [
            "",
            "### Decode at batches between the waves (96-192 programs of 8 key heads; CUDA graphs, TB/s)",
            "",
            "| batch | context | xopsaot | paged 16 | paged 128 | SDPA gqa | vs SDPA | paged 16 / 128 vs SDPA |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for x in r["decode_between_waves"]:
            ours, p16, p128, peer = (x[f"{k}_graph_tbps"] for k in ("contiguous", "paged16", "paged128", "sdpa_gqa"))
            lines.append(
                f"| {x['batch']} | {x['context']} | {ours:.2f} | {p16:.2f} | {p128:.2f} | {peer:.2f} "
                f"| {ours / peer:.2f}x | {p16 / peer:.2f}x / {p128 / peer:.2f}x |"
            )
    lines += ["", "## Varlen (12 sequences of 100 to 8192 tokens, 16 heads, head dim 128)", ""]
    lines += ["Timed as prefill is (sustained load), SM clock in MHz.", ""]
    lines += ["| causal | varlen TFLOP/s (real tokens) | padded dense TFLOP/s | ratio | clock: varlen / dense |",
              "|---|---|---|---|---|"]  # fmt: skip
    for x in r["varlen"]:
        lines.append(
            f"| {x['causal']} | {x['varlen_tflops']:.0f} | {x['dense_tflops']:.0f} | "
            f"{x['varlen_tflops'] / x['dense_tflops']:.2f} | {x.get('varlen_sm_mhz', float('nan')):.0f} / "
            f"{x.get('dense_padded_sm_mhz', float('nan')):.0f} |"
        )
    return "\n".join(lines) + "\n"


def plots(r: dict, path: Path) -> None:
    """Prefill TFLOP/s against sequence length per head dim and causality, and decode TB/s per shape, with peers."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for ax, dim in zip(axes[:2], (128, 64)):
        for causal, style in ((False, "-"), (True, "--")):
            rows = [x for x in r["prefill"] if x["dim"] == dim and x["causal"] == causal]
            seq = [x["seqlen"] for x in rows]
            for key, color in (("xopsaot", "C0"), ("sdpa_flash", "C1"), ("sdpa_cudnn", "C2")):
                ax.plot(seq, [x.get(f"{key}_tflops", float("nan")) for x in rows], style, color=color, marker="o",
                        label=f"{key}{' causal' if causal else ''}")  # fmt: skip
        ax.set(xscale="log", xlabel="sequence length", ylabel="TFLOP/s", title=f"prefill bf16, head dim {dim}")
        ax.legend(fontsize=7)
    ax = axes[2]
    labels = [f"b{x['batch']}/{x['context'] // 1024}k" for x in r["decode"]]
    keys = ("xopsaot", "paged16", "paged128", "sdpa_gqa")
    for i, key in enumerate(keys):
        ax.bar([j + 0.2 * i for j in range(len(labels))], [x[f"{key}_graph_tbps"] for x in r["decode"]], 0.2, label=key)
    ax.axhline(r["copy_tbps"], color="gray", linestyle=":", label="copy bandwidth")
    ax.set_xticks([j + 0.3 for j in range(len(labels))], labels)
    ax.set(ylabel="TB/s of KV read", title="decode, GQA 32:8, hd 128 (CUDA graphs)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warm_up_gpu()
    results = {"environment": environment(), "copy_tbps": copy_bandwidth()}
    results["decode"] = decode(args.quick)
    results["decode_between_waves"] = decode_between_waves(args.quick)
    results["prefill"] = prefill(args.quick)
    results["varlen"] = varlen()
    stem = results_stem(results["environment"], "attention-family")
    write_results(args.out, stem, results, markdown(results))
    plots(results, args.out / f"{stem}.png")
    print(markdown(results))


if __name__ == "__main__":
    main()
