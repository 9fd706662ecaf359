"""One prefill call shape on the Hopper prefill kernel for Nsight Compute (bf16; default head dim 64, 4 x 32 heads x
4096, causal): what bounds its consumers (pipes' utilization, warp stalls by reason and by instruction).

    ncu -k regex:attn_fwd_ws_dense -s 2 -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \\
        --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters \\
        python3 benchmarks/experiments/prefill_ncu.py [DIM SEQLEN BATCH HEADS CAUSAL]
"""

import sys

import torch

import xopsaot


def main() -> None:
    dim, seqlen, batch, heads, causal = (int(x) for x in (sys.argv[1:] or [64, 4096, 4, 32, 1]))
    q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for _ in range(4):  # ncu skips the first two launches of the kernel (-s 2) and profiles the third
        xopsaot.flash_attn(q, k, v, causal=bool(causal))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
