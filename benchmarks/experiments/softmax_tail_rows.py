"""softmax and log_softmax on rows past softmax_held_kernel's shared memory (16-bit rows of 114689-131072 elements,
float32 of 57345-65536), over a range of row counts: where the config that holds the rest in registers gains and
where it loses to the loop, run once per installed build (TB/s counting x read and the output written once).

    python3 benchmarks/experiments/softmax_tail_rows.py LABEL
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench_queued, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


def main() -> None:
    label = sys.argv[1]
    warm_up_gpu()
    cases = [((rows, 128256), torch.bfloat16) for rows in (528, 1024, 1056, 1536, 1584, 2112, 3072, 4096)]
    cases += [((rows, 131072), torch.bfloat16) for rows in (1024, 2112)]
    cases += [((rows, 65536), torch.float32) for rows in (528, 1024, 2048, 4096)]
    for shape, dtype in cases:
        x = torch.randn(shape, device="cuda", dtype=dtype)
        nbytes = 2 * x.numel() * x.element_size()
        for name in ("softmax", "log_softmax"):
            op = getattr(xopsaot, name)
            tbps = nbytes / bench_queued(lambda: op(x, -1)) / 1e9
            line = {"build": label, "op": f"{name} {str(dtype)[6:]}", "shape": list(shape), "tbps": round(tbps, 3)}
            print(json.dumps(line))


if __name__ == "__main__":
    main()
