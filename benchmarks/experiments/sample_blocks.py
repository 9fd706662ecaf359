"""sample_kernel's tile at few rows: the shipped kernel (kernels_src/sampling.py) through Triton's JIT, launched as
the wheel launches it (the run-time integers it does not hint left unspecialized), at several BLOCK / warps / stages,
beside the installed wheel's xopsaot.sample and torch's sort-based sampling. One program per row bisects the row's
keys about 31 times for top_k and as often for top_p, each pass reading the row from L2: at one row a single SM
does it all, bound by how many bytes its loads keep in flight. Device microseconds of queued calls (the same
logits every call, as a decode step's sampling reads the logits the LM head just wrote); every JIT result must equal
the wheel's tokens (same seed: the draws and the thresholds do not depend on the tile).

    python3 benchmarks/experiments/sample_blocks.py [--rows 1,8,64,256] [--wheel-only] [--dtype float32]
"""

import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lm_ops import torch_sample  # noqa: E402
from run import bench_queued, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402
from kernels_src.sampling import sample_kernel  # noqa: E402

UNHINTED = ["top_k", "per_row_temperature", "per_row_top_k", "per_row_top_p", "seed", "offset", "first_row"]
AS_AOT = triton.jit(sample_kernel.fn, do_not_specialize=UNHINTED)
TILES = [(4096, 8, 3), (4096, 8, 1), (8192, 8, 3), (8192, 16, 3), (16384, 16, 2), (16384, 16, 3), (16384, 32, 2)]
FILTERS = [(1.0, 0, 1.0), (0.7, 50, 1.0), (0.7, 0, 0.9), (0.7, 50, 0.9)]  # temperature, top_k (0: none), top_p
# the seed and the offset past 32 bits, so that the JIT types them as the wheel's int64 parameters
VOCAB, SEED, OFFSET = 128256, 2**40 + 1234, 2**32
DTYPE = torch.bfloat16


def launch(logits, out, tile, temperature, top_k, top_p):
    block, warps, stages = tile
    rows, n = logits.shape
    per_row_f, per_row_i = torch.ones(1, device="cuda"), torch.ones(1, device="cuda", dtype=torch.int32)  # unread
    AS_AOT[(rows,)](logits, out, per_row_f, per_row_i, per_row_f, logits.stride(0), n, float(temperature), top_k,
                    float(top_p), 0, 0, 0, SEED, OFFSET, 0, BLOCK=block, num_warps=warps,
                    num_stages=stages)  # fmt: skip


def main() -> None:
    rows_arg = sys.argv[sys.argv.index("--rows") + 1] if "--rows" in sys.argv else "1,8,64,256"
    rows_list = [int(r) for r in rows_arg.split(",")]
    global DTYPE
    DTYPE = getattr(torch, sys.argv[sys.argv.index("--dtype") + 1]) if "--dtype" in sys.argv else torch.bfloat16
    warm_up_gpu()
    print("us per call; a cell with (!) gave other tokens than the wheel")
    print("rows temperature top_k top_p", "torch", "wheel", *["/".join(map(str, t)) for t in TILES], sep="\t")
    for rows in rows_list:
        logits = torch.randn(rows, VOCAB, device="cuda", dtype=DTYPE) * 4
        for temperature, top_k, top_p in FILTERS:
            kwargs = {"top_k": top_k or None, "top_p": top_p if top_p < 1 else None}
            wheel = xopsaot.sample(logits, temperature, seed=SEED, offset=OFFSET, **kwargs)
            cells = [bench_queued(lambda: torch_sample(logits, temperature, top_k or None, top_p))]
            cells.append(bench_queued(lambda: xopsaot.sample(logits, temperature, seed=SEED, offset=OFFSET, **kwargs)))
            marks = ["", ""]
            for tile in [] if "--wheel-only" in sys.argv else TILES:
                out = torch.full((rows,), -7, device="cuda", dtype=torch.int64)
                launch(logits, out, tile, temperature, top_k, top_p)
                marks.append("" if torch.equal(out, wheel) else " (!)")
                cells.append(bench_queued(lambda tile=tile: launch(logits, out, tile, temperature, top_k, top_p)))
            row = [f"{ms * 1e3:.0f}{mark}" for ms, mark in zip(cells, marks)]
            print(rows, temperature, top_k, top_p, *row, sep="\t", flush=True)


if __name__ == "__main__":
    main()
