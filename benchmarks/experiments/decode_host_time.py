"""Where eager decode loses to its own CUDA graph: host microseconds per call of the installed wheel's
flash_attn_with_kvcache (contiguous, paged 16, paged 128) and torch SDPA (enable_gqa) at attention.py's decode
shapes, beside the eager (bench) and graph (graph_ms) device times of the same calls, and a cProfile of the
paged call's Python side. One JSON line per shape and call, then the profile's top entries.

    python3 benchmarks/experiments/decode_host_time.py LABEL [--profile]
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import DECODE_SHAPES, cache_layouts, decode_step, graph_ms, sdpa  # noqa: E402
from run import bench, host_times_us, print_profile  # noqa: E402

import xopsaot  # noqa: E402

label = sys.argv[1] if len(sys.argv) > 1 else "build"
for batch, context in DECODE_SHAPES:
    q, kc, vc, lengths, kv_bytes = decode_step(batch, context)
    calls = {"sdpa_gqa": lambda: sdpa(q, kc, vc, False)}
    for name, (k, v, table) in cache_layouts(kc, vc).items():
        calls[name] = lambda k=k, v=v, table=table: xopsaot.flash_attn_with_kvcache(
            q, k, v, cache_seqlens=lengths, block_table=table, validate=False
        )
    host = host_times_us(calls, calls=100, repeats=11)
    for name, fn in calls.items():
        eager, graph = bench(fn, reps=200), graph_ms(fn)
        line = {"build": label, "shape": f"b{batch}x{context}", "call": name, "host_us": round(host[name], 1),
                "eager_us": round(eager * 1e3, 1), "graph_us": round(graph * 1e3, 1),
                "eager_tbps": round(kv_bytes / eager / 1e9, 2),
                "graph_tbps": round(kv_bytes / graph / 1e9, 2)}  # fmt: skip
        print(json.dumps(line), flush=True)
    if "--profile" in sys.argv and batch == 1:
        for name in ("contiguous", "paged16"):
            print_profile(calls[name], 2000, f"{name} b{batch}x{context}")
