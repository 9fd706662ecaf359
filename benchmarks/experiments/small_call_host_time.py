"""Host microseconds per call of small (one decode token) calls of the installed wheel against torch's, and a
cProfile of the replayed calls' Python side: why does xopsaot.add cost more host time than xopsaot.rms_norm
(21.2 against 14.5 us in the committed 2026-11-24/25 tables)? One JSON line per call, then the profiles.

    python3 benchmarks/experiments/small_call_host_time.py LABEL [--profile]
"""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import host_times_us, print_profile  # noqa: E402

import xopsaot  # noqa: E402

label = sys.argv[1] if len(sys.argv) > 1 else "build"
x, y = (torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
calls = {
    "xopsaot add": lambda: xopsaot.add(x, y),
    "torch add": lambda: torch.add(x, y),
    "xopsaot mul scalar": lambda: xopsaot.mul(x, 0.5),
    "xopsaot silu": lambda: xopsaot.silu(x),
    "torch silu": lambda: F.silu(x),
    "xopsaot rms_norm": lambda: xopsaot.rms_norm(x, w),
    "torch rms_norm": lambda: F.rms_norm(x, (4096,), w),
    "xopsaot softmax": lambda: xopsaot.softmax(x, -1),
    "torch empty_like": lambda: torch.empty_like(x),
}
for name, us in host_times_us(calls, calls=200, repeats=21).items():
    print(json.dumps({"build": label, "call": name, "host_us": round(us, 2)}), flush=True)
if "--profile" in sys.argv:
    for name in ("xopsaot add", "xopsaot rms_norm"):
        print_profile(calls[name], 5000, name, entries=10)
