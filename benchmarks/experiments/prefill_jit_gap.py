"""Where the Hopper prefill's time goes between the wheel and Triton's JIT: the same shapes timed, in one process,
through the wheel's flash_attn (one call per event pair, and bursts of ten calls between two events), the
shipped attn_fwd_tma compiled by the device's Triton JIT, and prefill_overlap.py's minimal kernel (dense, no
window or varlen bookkeeping) at the same tile. TFLOP/s, bf16; batch x seqlen = 16k tokens, 2048 // dim heads
(the shapes of benchmarks/attention.py); each JIT result's largest error against SDPA on a slice in brackets.

    python3 benchmarks/experiments/prefill_jit_gap.py [--tiles 256,64,16,3;...]

--tiles adds tiles (BLOCK_M, BLOCK_N, warps, stages) of the minimal kernel to time beside the shipped one.

attn_fwd_tma, the Triton kernel this measures, was replaced by the Gluon kernel attn_fwd_ws in stop 22 (2026-11-24);
point the script at a kernels file of an earlier commit (`git show e9a27a0:kernels_src/attention.py`).
"""

import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "experiments"))
from prefill_overlap import fwd as minimal_fwd  # noqa: E402 (sets Triton's scratch allocator)
from run import bench  # noqa: E402

import xopsaot  # noqa: E402

spec = importlib.util.spec_from_file_location("attention_src", ROOT / "kernels_src" / "attention.py")
attention_src = importlib.util.module_from_spec(spec)
spec.loader.exec_module(attention_src)

SHIPPED = {64: (128, 64, 8, 3), 128: (128, 128, 8, 3)}  # the sm_90 table's prefill tiles
UNLIMITED = 1 << 30


def burst(fn, calls: int = 10, reps: int = 10) -> float:
    """Median milliseconds per call over bursts of `calls` calls between one pair of events."""
    fn()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return sorted(samples)[len(samples) // 2]


def shipped_launch(q, k, v, o, causal, tile):
    batch, seqlen, heads, dim = q.shape
    bm, bn, warps, stages = tile
    dummy = torch.zeros(2, device="cuda", dtype=torch.int32)
    lse = torch.empty(1, device="cuda", dtype=torch.float32)
    args = (q, k, v, o, lse, dummy, dummy, heads * dim, heads * dim, heads * dim, seqlen * heads * dim, heads * dim,
            dim, 0, 0, 0, batch * seqlen, batch * seqlen, seqlen, seqlen, heads, heads, 0, 0, UNLIMITED,
            0 if causal else UNLIMITED, 0, dim**-0.5 * 1.4426950408889634)  # fmt: skip
    grid = (triton_cdiv(seqlen, bm), heads, batch)
    kernel = attention_src.attn_fwd_tma[grid]
    return lambda: kernel(*args, BLOCK_D=dim, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)


def minimal_launch(q, k, v, o, causal, tile):
    batch, seqlen, heads, dim = q.shape
    bm, bn, warps, stages = tile
    grid = (seqlen // bm, heads, batch)
    options = {"D": dim, "BM": bm, "BN": bn, "CAUSAL": causal, "OVERLAP": False, "num_warps": warps,
               "num_stages": stages}  # fmt: skip
    scale = dim**-0.5 * 1.4426950408889634
    return lambda: minimal_fwd[grid](q, k, v, o, seqlen, heads, scale, **options)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def main() -> None:
    torch.manual_seed(0)
    extra = []
    if "--tiles" in sys.argv:
        text = sys.argv[sys.argv.index("--tiles") + 1]
        extra = [tuple(int(x) for x in t.split(",")) for t in text.split(";")]
    for dim in (64, 128):
        heads = 2048 // dim
        for seqlen in (4096, 8192, 16384):
            batch = 16384 // seqlen
            q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            o = torch.empty_like(q)
            for causal in (False, True):
                flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
                ref = torch.nn.functional.scaled_dot_product_attention(
                    *(t[:1, :, :2].transpose(1, 2) for t in (q, k, v)), is_causal=causal
                ).transpose(1, 2)

                def rate(ms: float) -> str:
                    return "%.0f" % (flops / ms / 1e9)

                def checked(launch) -> str:
                    o.fill_(float("nan"))
                    launch()
                    err = (o[:1, :, :2].float() - ref.float()).abs().max().item()
                    return f"{rate(bench(launch, reps=20))}/{rate(burst(launch))} ({err:.0e})"

                wheel = lambda: xopsaot.flash_attn(q, k, v, causal=causal)  # noqa: E731
                parts = [f"wheel {rate(bench(wheel, reps=20))}/{rate(burst(wheel))}"]
                tile = SHIPPED[dim]
                parts.append("shipped-jit " + checked(shipped_launch(q, k, v, o, causal, tile)))
                for t in [tile, *extra]:
                    name = "/".join(map(str, t))
                    try:
                        parts.append(f"minimal {name} " + checked(minimal_launch(q, k, v, o, causal, t)))
                    except Exception as e:  # out of shared memory or registers
                        parts.append(f"minimal {name} {type(e).__name__}")
                parts.append(f"wheel again {rate(bench(wheel, reps=20))}")
                print(f"D{dim} S{seqlen} causal={causal}: " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
