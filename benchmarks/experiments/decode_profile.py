"""Where a decode step's time goes: flash_attn_with_kvcache (bf16 cache, GQA 32:8, head dim 128) and SDPA with
enable_gqa at the attention benchmark's three shapes, ten calls captured in a CUDA graph and replayed under
torch.profiler. Prints each kernel's mean duration per call, and the graph's time per call (CUDA events) beside
the sum of its kernels: the difference is the gaps between them.

    python3 benchmarks/experiments/decode_profile.py [--splits N ...]
"""

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import DECODE_SHAPES, captured, decode_step, sdpa  # noqa: E402
from run import bench, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402

CALLS = 10


def kernel_times(graph: torch.cuda.CUDAGraph) -> dict:
    """Mean device microseconds per call of each kernel name, `graph` holding CALLS calls."""
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize()
    totals: dict = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name[:60]] += event.device_time / (5 * CALLS)
    return dict(totals)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--splits", type=int, nargs="*", default=[0])
    args = parser.parse_args()
    warm_up_gpu()
    for batch, context in DECODE_SHAPES:
        q, kc, vc, lengths, kv_bytes = decode_step(batch, context)
        calls = {"sdpa gqa": lambda: sdpa(q, kc, vc, False)}
        for splits in args.splits:
            calls[f"xopsaot splits={splits}"] = lambda s=splits: xopsaot.flash_attn_with_kvcache(
                q, kc, vc, cache_seqlens=lengths, num_splits=s, validate=False
            )
        for name, fn in calls.items():
            graph = captured(fn, CALLS)
            per_call = bench(graph.replay) / CALLS * 1e3
            kernels = kernel_times(graph)
            parts = ", ".join(f"{k} {us:.1f}" for k, us in sorted(kernels.items(), key=lambda kv: -kv[1]))
            print(f"b{batch} ctx{context} {name}: {per_call:.1f} us per call ({kv_bytes / per_call / 1e6:.2f} TB/s), "
                  f"kernels {sum(kernels.values()):.1f} us: {parts}")  # fmt: skip


if __name__ == "__main__":
    main()
