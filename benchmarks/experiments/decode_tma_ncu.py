"""One decode step on attn_decode_tma for Nsight Compute: batch 1, 128k keys, GQA 32:8, head dim 128, bf16 queries,
a contiguous cache in bf16 or float8_e4m3fn (16 slices of 8k keys: one program per multiprocessor of an H100). Run
it under ncu to see what bounds the fp8 cache's step (its consumer decodes e4m3 to fp16 in shared memory) beside the
16-bit one (memory):

    ncu -k regex:attn_decode_tma -s 2 -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \\
        --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section InstructionStats \\
        python3 benchmarks/experiments/decode_tma_ncu.py [--fp8]
"""

import argparse

import torch

import xopsaot


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp8", action="store_true")
    args = parser.parse_args()
    q = torch.randn(1, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(1, 131072, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    if args.fp8:
        kc, vc = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
    lengths = torch.full((1,), 131072, dtype=torch.int32, device="cuda")
    for _ in range(4):  # ncu skips the first two launches of the kernel (-s 2) and profiles the third
        xopsaot.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lengths, validate=False)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
