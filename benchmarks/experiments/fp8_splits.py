"""Decode with an fp8 (float8_e4m3fn) cache through the installed wheel against a forced num_splits: at batch 1-4
the fp8 cache reads fewer TB/s of its own bytes than the bf16 cache of its twice as many, so its steps take longer.
Is the fp8 step short of programs (the e4m3 decode's arithmetic wants more of them in flight than choose_splits'
two per multiprocessor), so that more slices pay? GQA 32:8, head dim 128, CUDA graphs; TB/s of the cache's own
bytes (bf16 rows beside, for the same shapes and counts). `--per-sm`: the fp8 contiguous cache at the slice counts
that make k programs per multiprocessor (k x SMs // (batch x 8 key heads)), k from 2 (choose_splits' count, but for
its 256-key minimum) to 8.

    python3 benchmarks/experiments/fp8_splits.py [--per-sm]
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import decode_step, kvcache_tbps, paged_view, slices_per_sm  # noqa: E402
from run import warm_up_gpu  # noqa: E402

SHAPES = ((1, 8192), (2, 4096), (4, 2048), (1, 32768), (4, 8192), (16, 4096))
SPLITS = (0, 8, 16, 32, 48, 64, 96, 128)
PER_SM_SHAPES = (*SHAPES, (2, 16384), (8, 16384), (8, 2048), (1, 4096), (32, 4096))


def per_sm() -> None:
    for batch, context in PER_SM_SHAPES:
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        k8, v8 = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
        cells = []
        for k in (0, 2, 3, 4, 5, 6, 8):
            splits = slices_per_sm(k, batch * 8)
            tbps = kvcache_tbps(q, k8, v8, lengths, nbytes / 2, splits=splits)
            cells.append(f"{k or 'auto'}/SM ({splits}):{tbps:.2f}")
        print(f"b{batch}x{context} fp8: " + " ".join(cells), flush=True)


def main() -> None:
    warm_up_gpu(1.0)
    if "--per-sm" in sys.argv:
        per_sm()
        return
    for batch, context in SHAPES:
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        k8, v8 = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
        kp, table = paged_view(kc, 16)
        kp, vp = kp.to(torch.float8_e4m3fn), paged_view(vc, 16, table)[0].to(torch.float8_e4m3fn)
        caches = {
            "bf16": (kc, vc, None, nbytes),
            "fp8": (k8, v8, None, nbytes / 2),
            "fp8 paged16": (kp, vp, table, nbytes / 2),
        }
        for name, (k, v, t, size) in caches.items():
            cells = []
            for splits in SPLITS:
                cells.append(f"{splits or 'auto'}:{kvcache_tbps(q, k, v, lengths, size, t, splits):.2f}")
            print(f"b{batch}x{context} {name}: " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
