"""The matmul family, cross entropy and sampling on a CUDA GPU, against the peers in the same run: cuBLAS (torch.mm,
F.linear, torch.addmm) for the products; torch eager and torch.compile of the unfused sequence for the fused
epilogue and the gated prologue; torch eager and torch.compile of F.cross_entropy and the measured copy bandwidth
for cross entropy; the unfused LM head + F.cross_entropy (time and peak memory) for linear_cross_entropy; torch's
sort-based top-k / top-p sampling with torch.multinomial for sample and linear_sample. Writes
<out>/<device>-<date>-lm-ops.{json,md}.

    python benchmarks/lm_ops.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (  # noqa: E402
    Rotation,
    bench,
    bench_queued,
    copy_bandwidth,
    environment,
    peer_preamble,
    peer_row,
    peer_table,
    results_stem,
    timed,
    warm_up_gpu,
    write_results,
)

import xopsaot  # noqa: E402

BF16 = torch.bfloat16


def randn(*shape, scale=1.0):
    return torch.randn(*shape, device="cuda", dtype=BF16) * scale


def timed_compiled(row: dict, fn, args) -> None:
    """row["torch_compile_ms"] (and its clock, as `timed` gives) for torch.compile of fn(*args); left out where
    torch.compile cannot run (it needs Triton and a C compiler on the machine)."""
    try:
        c = torch.compile(fn, dynamic=False)
        c(*args)
    except Exception:
        return
    timed(row, "torch_compile", lambda: c(*args))


# ---- the matmul family ----


def linear_gelu_residual(x, w, b, r):
    return F.gelu(F.linear(x, w, b), approximate="tanh") + r


def gated_linear(x1, x2, w, b, r):
    return F.linear(F.silu(x1) * x2, w, b) + r


def matmul_rows() -> list[dict]:
    rows = []
    for n in (4096, 8192):
        a, b = randn(n, n), randn(n, n)
        w, bias, res = randn(n, n, scale=n**-0.5), randn(n), randn(n, n)
        x2 = randn(n, n)
        flops = 2 * n**3
        cases = {
            "mm": (lambda: xopsaot.mm(a, b), lambda: torch.mm(a, b), None, None),
            "linear (x @ W.T)": (lambda: xopsaot.linear(a, w), lambda: F.linear(a, w), None, None),
            "addmm (bias row)": (
                lambda: xopsaot.addmm(bias, a, b),
                lambda: torch.addmm(bias, a, b),
                None,
                None,
            ),
            "linear + bias, gelu_tanh, + residual": (
                lambda: xopsaot.linear(a, w, bias, "gelu_tanh", res),
                lambda: linear_gelu_residual(a, w, bias, res),
                linear_gelu_residual,
                (a, w, bias, res),
            ),
            "gate_linear silu + bias + residual": (
                lambda: xopsaot.gate_linear(a, x2, w, bias, res, act="silu"),
                lambda: gated_linear(a, x2, w, bias, res),
                gated_linear,
                (a, x2, w, bias, res),
            ),
        }
        for name, (ours, peer, fn, args) in cases.items():
            row = {"op": name, "n": n}
            timed(row, "xopsaot", ours)
            timed(row, "torch", peer)
            if fn is not None:
                timed_compiled(row, fn, args)
            row["xopsaot_tflops"] = flops / row["xopsaot_ms"] / 1e9
            row["torch_tflops"] = flops / row["torch_ms"] / 1e9
            print(f"{name} {n}: {row['xopsaot_tflops']:.0f} TFLOP/s, torch {row['torch_tflops']:.0f}", flush=True)
            rows.append(row)
    return rows


def decode_rows() -> list[dict]:
    """Few rows (decode batches) against a layer's weight: linear (with a bias) and gate_linear (with a residual),
    device time of queued calls. Each call reads the next of several weights, together well past the 50 MB L2, as
    a model's successive layers do; TB/s counts the weight's bytes."""
    rows = []
    for n, k in ((4096, 4096), (14336, 4096)):
        w = Rotation(lambda n=n, k=k: randn(n, k, scale=k**-0.5)).next
        bias = randn(n)
        for m in (1, 4, 16, 17, 64):
            x1, x2, res = randn(m, k), randn(m, k), randn(m, n)
            row = {"m": m, "k": k, "n": n}
            row["linear_us"] = bench_queued(lambda: xopsaot.linear(x1, w(), bias)) * 1e3
            row["torch_linear_us"] = bench_queued(lambda: F.linear(x1, w(), bias)) * 1e3
            row["gate_linear_us"] = bench_queued(lambda: xopsaot.gate_linear(x1, x2, w(), bias, res)) * 1e3
            row["torch_gate_linear_us"] = bench_queued(lambda: gated_linear(x1, x2, w(), bias, res)) * 1e3
            row["linear_tbps"] = n * k * 2 / row["linear_us"] / 1e6
            print(f"decode {m} x {k} -> {n}: linear {row['linear_us']:.1f} us, F.linear {row['torch_linear_us']:.1f}")
            rows.append(row)
    return rows


# ---- cross entropy ----


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


def per_row_cross_entropy(logits, target):
    return F.cross_entropy(logits, target, reduction="none")


def cross_entropy_rows(copy_tbps: float) -> list[dict]:
    rows = []
    for m, v in ((4096, 4096), (8192, 32000), (8192, 128256)):
        logits = randn(m, v, scale=3.0)
        target = torch.randint(0, v, (m,), device="cuda")
        nbytes = logits.numel() * 2 + m * 8
        ours = lambda x, t: xopsaot.cross_entropy(x, t, validate=False)  # noqa: E731
        rows.append(peer_row("cross_entropy (mean)", [m, v], nbytes, ours, cross_entropy, copy_tbps, (logits, target)))
        per_row = lambda x, t: xopsaot.cross_entropy(x, t, reduction="none", validate=False)  # noqa: E731
        rows.append(
            peer_row(
                "cross_entropy (none)", [m, v], nbytes, per_row, per_row_cross_entropy, copy_tbps, (logits, target)
            )
        )
    return rows


class MemPool:
    """High-water mark of the device's default stream-ordered pool (cuMemAllocAsync), where xopsaot's workspaces
    live; torch's caching allocator does not allocate from it."""

    USED_MEM_HIGH = 8  # CU_MEMPOOL_ATTR_USED_MEM_HIGH

    def __init__(self) -> None:
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.pool = ctypes.c_void_p()
        assert self.cuda.cuDeviceGetDefaultMemPool(ctypes.byref(self.pool), torch.cuda.current_device()) == 0

    def reset(self) -> None:
        zero = ctypes.c_uint64(0)
        assert self.cuda.cuMemPoolSetAttribute(self.pool, self.USED_MEM_HIGH, ctypes.byref(zero)) == 0

    def high(self) -> int:
        value = ctypes.c_uint64(0)
        assert self.cuda.cuMemPoolGetAttribute(self.pool, self.USED_MEM_HIGH, ctypes.byref(value)) == 0
        return value.value


def peak_bytes(fn, pool: MemPool) -> dict:
    """Peak memory of one call beyond what is allocated before it: torch's allocator and the stream-ordered pool."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    pool.reset()
    out = fn()
    torch.cuda.synchronize()
    del out
    return {"torch_allocator": torch.cuda.max_memory_allocated() - base, "stream_pool": pool.high()}


def unfused_lm_loss(x, w, t):
    return F.cross_entropy(F.linear(x, w), t)


def linear_cross_entropy_rows() -> list[dict]:
    pool = MemPool()
    rows = []
    for m, d, v in ((8192, 4096, 128256), (4096, 4096, 256000)):
        x, w = randn(m, d), randn(v, d, scale=d**-0.5)
        t = torch.randint(0, v, (m,), device="cuda")
        ours = lambda: xopsaot.linear_cross_entropy(x, w, t, validate=False)  # noqa: E731
        eager = lambda: unfused_lm_loss(x, w, t)  # noqa: E731
        row = {"shape": [m, d, v], "logits_bytes": m * v * 2}
        timed(row, "xopsaot", ours)
        timed(row, "torch", eager)
        timed_compiled(row, unfused_lm_loss, (x, w, t))
        timed(row, "lm_head", lambda: F.linear(x, w))
        row["xopsaot_peak"] = peak_bytes(ours, pool)
        row["torch_peak"] = peak_bytes(eager, pool)
        row["tflops"] = 2 * m * d * v / row["xopsaot_ms"] / 1e9
        print(f"linear_cross_entropy {m}x{d}x{v}: {row['xopsaot_ms']:.2f} ms, eager {row['torch_ms']:.2f}", flush=True)
        rows.append(row)
    return rows


# ---- sampling ----


def torch_sample(logits, temperature, top_k, top_p):
    """The usual sort-based sampling: temperature, top-k with torch.topk, top-p over the sorted probabilities,
    then torch.multinomial."""
    logits = logits.float() / temperature
    if top_k:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        drop = cumulative - sorted_logits.softmax(-1) > top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.empty_like(logits).scatter_(-1, order, sorted_logits)
    return torch.multinomial(logits.softmax(-1), 1)[:, 0]


def sampling_rows() -> list[dict]:
    rows = []
    for batch in (1, 64, 256):
        logits = randn(batch, 128256, scale=3.0)
        for temperature, top_k, top_p in ((1.0, None, 1.0), (0.7, 50, 1.0), (0.7, None, 0.9), (0.7, 50, 0.9)):
            ours = lambda: xopsaot.sample(logits, temperature, top_k, top_p, seed=1)  # noqa: E731
            peer = lambda: torch_sample(logits, temperature, top_k, top_p)  # noqa: E731
            row = {
                "batch": batch,
                "vocab": 128256,
                "temperature": temperature,
                "top_k": top_k,
                "top_p": top_p,
                "xopsaot_us": bench(ours) * 1e3,
                "torch_us": bench(peer) * 1e3,
            }
            print(
                f"sample {batch} k={top_k} p={top_p}: {row['xopsaot_us']:.0f} us, torch {row['torch_us']:.0f}",
                flush=True,
            )
            rows.append(row)
    return rows


def linear_sample_rows() -> list[dict]:
    rows = []
    w = randn(128256, 4096, scale=4096**-0.5)
    for batch in (1, 64):
        x = randn(batch, 4096)
        ours = lambda: xopsaot.linear_sample(x, w, None, 0.7, 50, 0.9, seed=1)  # noqa: E731
        peer = lambda: torch_sample(F.linear(x, w), 0.7, 50, 0.9)  # noqa: E731
        row = {
            "batch": batch,
            "hidden": 4096,
            "vocab": 128256,
            "xopsaot_us": bench(ours) * 1e3,
            "torch_us": bench(peer) * 1e3,
            "lm_head_us": bench(lambda: F.linear(x, w)) * 1e3,
        }
        print(f"linear_sample {batch}: {row['xopsaot_us']:.0f} us, torch {row['torch_us']:.0f}", flush=True)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    warm_up_gpu()
    results = {"environment": environment(), "copy_tbps": copy_bandwidth()}
    results["matmul"] = matmul_rows()
    results["decode"] = decode_rows()
    results["cross_entropy"] = cross_entropy_rows(results["copy_tbps"])
    results["linear_cross_entropy"] = linear_cross_entropy_rows()
    results["sample"] = sampling_rows()
    results["linear_sample"] = linear_sample_rows()
    text = markdown(results)
    write_results(args.out, results_stem(results["environment"], "lm-ops"), results, text)
    print(text)


def _ratio(a, b) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}x"


def markdown(results: dict) -> str:
    lines = [
        *peer_preamble("The matmul family, cross entropy and sampling", results, "lm_ops.py"),
        "",
        "## Matmul family, bf16 squares (n x n x n), CUDA events, median",
        "",
        "Peers: cuBLAS through torch.mm / F.linear / torch.addmm; for the fused rows, torch eager and torch.compile",
        "of the unfused sequence. TFLOP/s count 2 n^3. Each function runs back to back for 0.5 s before 0.5 s of",
        "timed calls (`bench_sustained`): these products run an H100 at its 700 W power cap, where short timings",
        "read the clock's transient after whatever ran before. SM clock (MHz) sampled by nvidia-smi meanwhile.",
        "",
        "| op | n | xopsaot TFLOP/s | torch TFLOP/s | vs torch | vs torch.compile | clock: xopsaot / torch |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["matmul"]:
        lines.append(
            f"| {r['op']} | {r['n']} | {r['xopsaot_tflops']:.0f} | {r['torch_tflops']:.0f} | "
            f"{r['torch_ms'] / r['xopsaot_ms']:.2f}x | {_ratio(r.get('torch_compile_ms'), r['xopsaot_ms'])} | "
            f"{r.get('xopsaot_sm_mhz', float('nan')):.0f} / {r.get('torch_sm_mhz', float('nan')):.0f} |"
        )
    lines += [
        "",
        "## Few rows (decode batches): linear with a bias, gate_linear with a residual; device microseconds",
        "",
        "Calls queued behind a sleeping kernel, each reading the next of several weights (together past the L2), so",
        "the weight streams from memory as a model's layers do. TB/s counts the weight's bytes.",
        "",
        "| rows | K -> N | linear | F.linear | vs F.linear | linear TB/s | gate_linear | torch unfused | vs torch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["decode"]:
        lines.append(
            f"| {r['m']} | {r['k']} -> {r['n']} | {r['linear_us']:.1f} | {r['torch_linear_us']:.1f} | "
            f"{r['torch_linear_us'] / r['linear_us']:.2f}x | {r['linear_tbps']:.2f} | {r['gate_linear_us']:.1f} | "
            f"{r['torch_gate_linear_us']:.1f} | {r['torch_gate_linear_us'] / r['gate_linear_us']:.2f}x |"
        )
    lines += ["", "## Cross entropy (bf16 logits, int64 targets; mean, and per row)", ""]
    lines += peer_table(results["cross_entropy"])
    lines += [
        "",
        "## linear_cross_entropy (bf16; x (tokens, hidden), weight (vocab, hidden), mean)",
        "",
        "Peak memory beyond the inputs: torch's allocator, and the stream-ordered pool where xopsaot's workspace",
        "lives (its high-water mark, CU_MEMPOOL_ATTR_USED_MEM_HIGH). Times under sustained load, as the matmul rows.",
        "",
        "| tokens x hidden x vocab | xopsaot ms | torch eager ms | torch.compile ms | LM head alone (cuBLAS) ms | "
        "vs eager | logits | xopsaot peak | torch eager peak |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["linear_cross_entropy"]:
        mib = 2**20
        ours = r["xopsaot_peak"]["torch_allocator"] + r["xopsaot_peak"]["stream_pool"]
        theirs = r["torch_peak"]["torch_allocator"] + r["torch_peak"]["stream_pool"]
        comp = f"{r['torch_compile_ms']:.2f}" if "torch_compile_ms" in r else "n/a"
        lines.append(
            f"| {' x '.join(map(str, r['shape']))} | {r['xopsaot_ms']:.2f} | {r['torch_ms']:.2f} | {comp} | "
            f"{r['lm_head_ms']:.2f} | {r['torch_ms'] / r['xopsaot_ms']:.2f}x | {r['logits_bytes'] / mib:.0f} MiB | "
            f"{ours / mib:.0f} MiB | {theirs / mib:.0f} MiB |"
        )
    lines += [
        "",
        "## sample (128256 logits per row, bf16)",
        "",
        "Peer: temperature, torch.topk, a sort for top-p, torch.multinomial (the sort-based sampling servers fall",
        "back to).",
        "",
        "| batch | temperature | top_k | top_p | xopsaot us | torch us | vs torch |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["sample"]:
        lines.append(
            f"| {r['batch']} | {r['temperature']} | {r['top_k']} | {r['top_p']} | {r['xopsaot_us']:.0f} | "
            f"{r['torch_us']:.0f} | {r['torch_us'] / r['xopsaot_us']:.2f}x |"
        )
    lines += [
        "",
        "## linear_sample (hidden 4096, vocab 128256, bf16; temperature 0.7, top_k 50, top_p 0.9)",
        "",
        "| batch | xopsaot us | F.linear + torch sampling us | F.linear alone us | vs torch |",
        "|---|---|---|---|---|",
    ]
    for r in results["linear_sample"]:
        lines.append(
            f"| {r['batch']} | {r['xopsaot_us']:.0f} | {r['torch_us']:.0f} | {r['lm_head_us']:.0f} | "
            f"{r['torch_us'] / r['xopsaot_us']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
