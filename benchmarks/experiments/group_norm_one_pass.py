"""group_norm's split groups in one launch, through Triton's JIT as the wheel launches it (only n_elems and chunk
specialized). A program takes a ticket (an atomic counter, so that the programs of a group only ever wait on peers
that have started or will start next), sums its chunk, publishes the sums, waits until all its group's chunks have
published (a per-group arrival counter), adds them in a fixed order and writes its chunk, reading it a second time
from L2 where it has just read it. The shipped split path (two launches, the second re-reading x across the whole
tensor) and the wheel run in the same process for comparison; TB/s counting x read and y written once; every result
is checked against float64 first (outputs poisoned).

Each timed call either zeroes its counters itself (torch's fill, as a memset before the launch would) or takes a
pre-zeroed slice (what the launch alone costs).

    python3 benchmarks/experiments/group_norm_one_pass.py
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from group_norm_split import SMS, cdiv  # noqa: E402
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.norm import _shifted_sums, _write_chunk  # noqa: E402

MAX_SPLITS = 64


@triton.jit(do_not_specialize=["spatial", "channels_per_group", "groups", "has_weight", "has_bias", "splits"])
def one_pass_kernel(X, W, B, Y, Partials, Counters, n_elems, chunk, spatial, channels_per_group, groups, eps,
                    has_weight, has_bias, splits, BLOCK_N: tl.constexpr, BACKWARD: tl.constexpr,
                    EVICT_FIRST: tl.constexpr, TICKET: tl.constexpr):  # fmt: skip
    if TICKET:
        ticket = tl.atomic_add(Counters, 1, sem="relaxed")
    else:
        ticket = tl.program_id(0)
    row = (ticket // splits).to(tl.int64)
    split = ticket % splits
    first_channel = (ticket // splits % groups) * channels_per_group
    X += row * n_elems
    Y += row * n_elems
    n = n_elems.to(tl.int32)
    start = split * chunk
    end = start + tl.minimum(chunk, n - start)
    shift = tl.load(X).to(tl.float32)
    sums, squares = _shifted_sums(X, start, end, shift, BLOCK_N)
    mine = Partials + (row * splits + split) * 2
    tl.store(mine, sums)
    tl.store(mine + 1, squares)
    tl.debug_barrier()  # every thread's stores before the release
    arrived = tl.atomic_add(Counters + 1 + row, 1, sem="acq_rel") + 1
    while arrived < splits:
        arrived = tl.atomic_add(Counters + 1 + row, 0, sem="acquire")
    p = tl.arange(0, 64)
    theirs = Partials + row * splits * 2 + p * 2
    total = tl.sum(tl.load(theirs, mask=p < splits, other=0.0, cache_modifier=".cg"), axis=0)
    total_sq = tl.sum(tl.load(theirs + 1, mask=p < splits, other=0.0, cache_modifier=".cg"), axis=0)
    mean_shifted = total / n
    rstd = tl.rsqrt(tl.maximum(total_sq / n - mean_shifted * mean_shifted, 0.0) + eps)
    eviction: tl.constexpr = "evict_first" if EVICT_FIRST else ""
    if spatial % 16 == 0:
        _write_chunk(X, Y, W, B, start, end, shift, mean_shifted, rstd, first_channel, (spatial // 16) * 16,
                     has_weight, has_bias, BACKWARD, BLOCK_N, eviction)  # fmt: skip
    else:
        _write_chunk(X, Y, W, B, start, end, shift, mean_shifted, rstd, first_channel, spatial, has_weight, has_bias,
                     BACKWARD, BLOCK_N, eviction)  # fmt: skip


SHAPES = [((2, 512, 128, 128), 32), ((1, 512, 128, 128), 32), ((4, 512, 128, 128), 32), ((2, 128, 256, 256), 32),
          ((8, 320, 64, 64), 32), ((16, 256, 64, 64), 32), ((32, 256, 64, 64), 32), ((12, 256, 64, 64), 32),
          ((4, 128, 128, 128), 32)]  # fmt: skip
# (chunk, BLOCK_N, warps, backward, evict_first)
CONFIGS = [(4096, 4096, 8, True, True), (8192, 4096, 8, True, True), (16384, 4096, 8, True, True),
           (32768, 4096, 8, True, True), (8192, 2048, 4, True, True), (16384, 2048, 4, True, True),
           (8192, 4096, 8, False, True), (8192, 4096, 8, True, False), (16384, 8192, 16, True, True)]  # fmt: skip


def main() -> None:
    import xopsaot

    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s, {SMS} SMs, xopsaot {xopsaot.__file__}")
    print("config columns: chunk/BLOCK_N/warps/backward/evict_first; each cell 'with memset | launch alone'")
    print("shape / groups", "eager", "wheel", *["/".join(str(int(v)) for v in c) for c in CONFIGS], sep="\t")
    for shape, groups in SHAPES:
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 2 + 3
        w, b = (torch.randn(shape[1], device="cuda", dtype=torch.bfloat16) for _ in range(2))
        y = torch.empty_like(x)
        want = F.group_norm(x.double(), groups, w.double(), b.double())
        nbytes = 2 * x.numel() * 2
        rows = shape[0] * groups
        cpg, spatial = shape[1] // groups, x[0, 0].numel()
        n = cpg * spatial
        cells = [nbytes / bench_queued(lambda: F.group_norm(x, groups, w, b)) / 1e9]
        y.fill_(float("nan"))
        xopsaot.group_norm(x, groups, w, b)
        cells.append(nbytes / bench_queued(lambda: xopsaot.group_norm(x, groups, w, b)) / 1e9)
        texts = [f"{c:.2f}" for c in cells]
        for chunk, block, warps, backward, evict in CONFIGS:
            splits = cdiv(n, chunk)
            if splits > MAX_SPLITS or splits < 2:
                texts.append("-")
                continue
            partials = torch.empty(rows * splits * 2, device="cuda", dtype=torch.float32)
            slots = 3 + 30 * 10 + 2
            counters = torch.zeros(slots, 1 + rows, device="cuda", dtype=torch.int32)
            turn = [0]

            def launch(zero: bool, counters=counters, partials=partials, splits=splits, chunk=chunk, block=block,
                       warps=warps, backward=backward, evict=evict):  # fmt: skip
                if zero:
                    c = counters[0]
                    c.zero_()
                else:
                    c = counters[turn[0] % slots]
                    turn[0] += 1
                one_pass_kernel[(rows * splits,)](x, w, b, y, partials, c, n, chunk, spatial, cpg, groups, 1e-5, 1, 1,
                                                  splits, BLOCK_N=block, BACKWARD=backward, EVICT_FIRST=evict,
                                                  TICKET=True, num_warps=warps)  # fmt: skip

            y.fill_(float("nan"))
            launch(True)
            err = (y.double() - want).abs().max().item()
            assert err < 0.1, (shape, chunk, err)
            with_memset = nbytes / bench_queued(lambda: launch(True)) / 1e9
            counters.zero_()
            turn[0] = 0
            alone = nbytes / bench_queued(lambda: launch(False)) / 1e9
            texts.append(f"{with_memset:.2f} | {alone:.2f} ({splits})")
        print(f"{shape} / {groups}", *texts, sep="\t", flush=True)


if __name__ == "__main__":
    main()
