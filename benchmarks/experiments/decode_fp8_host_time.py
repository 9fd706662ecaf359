"""Whether an fp8 cache's decode step costs more host time than a bf16 one: host microseconds per call
(host_times_us, the GPU kept busy), eager and CUDA-graph device microseconds of flash_attn_with_kvcache at
attention.py's decode shapes, for the bf16 cache, its float8_e4m3fn copy with k_scale=v_scale=1.0 passed ("fp8") and
with the scales left at their default ("fp8_s1"). One line per shape and call.

    python3 benchmarks/experiments/decode_fp8_host_time.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import DECODE_SHAPES, decode_step, graph_ms  # noqa: E402
from run import bench, host_times_us  # noqa: E402

import xopsaot  # noqa: E402

for batch, context in DECODE_SHAPES:
    q, kc, vc, lengths, nbytes = decode_step(batch, context)
    k8, v8 = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
    options = {"cache_seqlens": lengths, "validate": False}
    calls = {
        "bf16": lambda: xopsaot.flash_attn_with_kvcache(q, kc, vc, **options),
        "fp8": lambda: xopsaot.flash_attn_with_kvcache(q, k8, v8, k_scale=1.0, v_scale=1.0, **options),
        "fp8_s1": lambda: xopsaot.flash_attn_with_kvcache(q, k8, v8, **options),
    }
    host = host_times_us(calls)
    for name, fn in calls.items():
        print(f"b{batch} ctx{context} {name}: host {host[name]:.1f} us, eager {bench(fn) * 1e3:.1f} us, "
              f"graph {graph_ms(fn) * 1e3:.1f} us", flush=True)  # fmt: skip
