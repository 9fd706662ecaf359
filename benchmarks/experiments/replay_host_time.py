"""Host microseconds per call (run.host_times_us: the GPU kept busy, median of bursts) of the calls whose fast-path
replay stop 46 changed, on the installed wheel: seed=None (sample, dropout), validated calls with no index tensor
to read (apply_rotary with an int offset, the KV cache without cache_seqlens), and, for scale, calls that still
take the full path (cache_seqlens checked on the host) and torch's nearest calls. One decode token's shapes; run
once per wheel in one device call to compare builds.

    python3 benchmarks/experiments/replay_host_time.py LABEL    (from the repository root)
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from run import host_times_us  # noqa: E402

import xopsaot  # noqa: E402

label = sys.argv[1] if len(sys.argv) > 1 else "build"
torch.manual_seed(0)
bf16 = dict(device="cuda", dtype=torch.bfloat16)
logits = torch.randn(1, 128256, **bf16)
hidden = torch.randn(1, 4096, **bf16)
x = torch.randn(1, 1, 32, 128, **bf16)
cos, sin = torch.randn(4096, 64, **bf16), torch.randn(4096, 64, **bf16)
q, k_cache, v_cache = (
    torch.randn(1, 1, 32, 128, **bf16),
    torch.randn(1, 4096, 8, 128, **bf16),
    torch.randn(1, 4096, 8, 128, **bf16),
)
lengths = torch.full((1,), 4096, device="cuda", dtype=torch.int32)
calls = {
    "sample T=1 seed=None": lambda: xopsaot.sample(logits, 1.0),
    "sample k50 p0.9 seed=None": lambda: xopsaot.sample(logits, 0.7, 50, 0.9),
    "sample T=1 seed=1": lambda: xopsaot.sample(logits, 1.0, seed=1),
    "torch.argmax": lambda: torch.argmax(logits, -1),
    "dropout 1x4096 seed=None": lambda: xopsaot.dropout(hidden, 0.1),
    "torch F.dropout": lambda: F.dropout(hidden, 0.1),
    "apply_rotary seqlen_offsets=7": lambda: xopsaot.apply_rotary(x, cos, sin, seqlen_offsets=7),
    "kvcache, no cache_seqlens": lambda: xopsaot.flash_attn_with_kvcache(q, k_cache, v_cache),
    "kvcache, cache_seqlens checked": lambda: xopsaot.flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=lengths
    ),
    "kvcache, cache_seqlens validate=False": lambda: xopsaot.flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=lengths, validate=False
    ),
}
for name, us in host_times_us(calls, calls=200, repeats=21).items():
    print(json.dumps({"build": label, "call": name, "host_us": round(us, 1)}), flush=True)
