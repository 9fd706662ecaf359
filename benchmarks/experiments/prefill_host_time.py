"""Host time per Hopper prefill call (the launcher encodes its TMA descriptors on the host since 2e5295f): median
host microseconds per call of the installed wheel's flash_attn and flash_attn_varlen on small bf16 batches, with
torch's SDPA (flash backend) in the same process as a reference. One JSON line per call.

    python3 benchmarks/experiments/prefill_host_time.py LABEL
"""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import host_times_us  # noqa: E402

import xopsaot  # noqa: E402

label = sys.argv[1] if len(sys.argv) > 1 else "build"
q, k, v = (torch.randn(1, 128, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
packed = [x.view(128, 8, 128) for x in (q, k, v)]
cu = torch.tensor([0, 50, 128], dtype=torch.int32, device="cuda")
qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))


def sdpa():
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)


times = host_times_us(
    {
        "flash_attn 1x128x8x128 causal": lambda: xopsaot.flash_attn(q, k, v, causal=True),
        "flash_attn_varlen 2 sequences, causal": lambda: xopsaot.flash_attn_varlen(
            *packed, cu, cu, 78, 78, causal=True, validate=False
        ),
        "torch SDPA flash 1x128x8x128 causal": sdpa,
    }
)
for name, us in times.items():
    print(json.dumps({"build": label, "call": name, "host_us": round(us, 2)}), flush=True)
