"""Benchmarks on a CUDA GPU, with the peers measured in the same run. Writes JSON, a markdown table and plots.

    python benchmarks/run.py --out benchmarks/results [--quick]

Timing: CUDA events around each call, warm-up first, the median of many runs; inputs much larger than L2 for
the bandwidth figures. The helpers here serve the other scripts too: `bench_sustained` (and `timed`) for
compute-bound kernels, which run an H100 at its power cap, `bench_queued` for memory-bound ones,
`forced_variant_env` for timing one compiled config through the autotune cache. Peers: torch
eager, SDPA with the flash and cuDNN backends, cuBLAS (torch.matmul), the measured device-to-device copy
bandwidth; cold start against Triton JIT compiling the same attention kernel.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import xopsaot

ROOT = Path(__file__).resolve().parent.parent


def bench(fn, warmup: int = 10, reps: int = 50) -> float:
    """Median milliseconds per call, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


class GpuMonitor:
    """The SM clock, power draw and power-cap flag sampled by nvidia-smi every 50 ms while the block runs
    (`summary` is empty where nvidia-smi is absent)."""

    QUERY = "clocks.sm,power.draw,clocks_event_reasons.sw_power_cap"

    def __enter__(self) -> GpuMonitor:
        command = ["nvidia-smi", f"--query-gpu={self.QUERY}", "--format=csv,noheader,nounits", "-lms", "50"]
        try:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.process = None
        return self

    def __exit__(self, *exc) -> None:
        self.samples = []
        if self.process is None:
            return
        self.process.terminate()
        for line in self.process.communicate()[0].splitlines():
            fields = [f.strip() for f in line.split(",")]
            try:
                self.samples.append((float(fields[0]), float(fields[1]), fields[2] == "Active"))
            except (ValueError, IndexError):
                pass

    def summary(self) -> dict:
        if not self.samples:
            return {}
        return {
            "sm_mhz": statistics.median(s[0] for s in self.samples),
            "power_w": statistics.median(s[1] for s in self.samples),
            "power_capped": sum(s[2] for s in self.samples) / len(self.samples),
        }


def bench_sustained(fn, settle_s: float = 0.5, seconds: float = 0.5) -> tuple[float, dict]:
    """Median milliseconds per call (CUDA events around each) after fn ran back to back for settle_s, so the
    clocks have settled where the power limit holds them; and GpuMonitor's summary over the timed calls. Compute-
    bound kernels run an H100 at its 700 W cap, where the SM clock drops from 1980 MHz to 1200-1900 within about
    0.1 s of load and recovers within a fraction of a second when load stops (h100-2026-11-24-experiments.md,
    stop 27); `bench`'s few warm-up calls would time that transient, fast or slow by what ran before."""
    fn()
    torch.cuda.synchronize()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < settle_s:
        for _ in range(5):
            fn()
        calls += 5
        torch.cuda.synchronize()
    reps = max(20, int(seconds / ((time.perf_counter() - start) / calls)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    with GpuMonitor() as monitor:
        for begin, end in events:
            begin.record()
            fn()
            end.record()
        torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events), monitor.summary()


def timed(row: dict, name: str, fn) -> None:
    """row[name_ms] from bench_sustained (for compute-bound kernels, which run an H100 at its power cap), with the
    SM clock and power read meanwhile (name_sm_mhz, name_power_w, name_power_capped: the share of samples at the
    cap)."""
    row[f"{name}_ms"], state = bench_sustained(fn)
    row.update({f"{name}_{key}": value for key, value in state.items()})


def bench_queued(fn, calls: int = 10, reps: int = 30) -> float:
    """Median device milliseconds per call over bursts of `calls` calls queued behind a sleeping kernel, so the
    host's launch cost (measured apart by host_times_us) never leaves the GPU idle between them: at 4096 x 4096 a
    memory-bound op takes about as long on the GPU as a Python call takes on the host."""
    for _ in range(3):
        fn()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2_000_000)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return statistics.median(samples)


class Rotation:
    """Several tensors from `make`, together at least `total` bytes (past an H100's 50 MB L2), handed out in turn:
    a timed call that takes the next one reads it from memory, as a model's successive layers read theirs."""

    def __init__(self, make, total: int = 256 * 2**20) -> None:
        first = make()
        count = max(2, -(-total // (first.numel() * first.element_size())))
        self.tensors = [first] + [make() for _ in range(count - 1)]
        self.turn = 0

    def next(self) -> torch.Tensor:
        self.turn = (self.turn + 1) % len(self.tensors)
        return self.tensors[self.turn]


def warm_up_gpu(seconds: float = 2.0) -> None:
    """Run matrix products for a while so clocks have ramped up before the first measurement."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


def host_times_us(fns: dict, calls: int = 400, repeats: int = 41) -> dict:
    """Median host microseconds per call of each function. The GPU is kept busy (torch.cuda._sleep) while a
    burst of calls is queued, so launches never wait for the device: this is the time the calling thread spends
    per call. The functions take turns, burst by burst, so they see the same host conditions."""
    for fn in fns.values():
        for _ in range(1000):
            fn()
    torch.cuda.synchronize()
    samples: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            torch.cuda._sleep(40_000_000)  # ~20 ms of GPU work ahead of the burst
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
    return {name: statistics.median(values) for name, values in samples.items()}


def print_profile(fn, calls: int, title: str, entries: int = 12) -> None:
    """cProfile `calls` calls of fn (the host side of an op call) and print the entries with the most own time."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        fn()
    profile.disable()
    torch.cuda.synchronize()
    print(f"--- cProfile, {calls} calls of {title}")
    pstats.Stats(profile).sort_stats("tottime").print_stats(entries)


def forced_variant_env(device: str, primary: dict, variant: dict) -> dict:
    """The environment of a child process that launches `variant` (a manifest entry) wherever its bucket's config
    `primary` would run: an autotune cache file that names it as the device's choice (XOPSAOT_AUTOTUNE=1 then
    reads it instead of timing), or autotuning off when it is the primary itself."""
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
        if variant is not primary:
            f.write(f"{device}\t{primary['label']}\t{variant['when']}\t{variant['label']}\n")
    return {**os.environ, "XOPSAOT_AUTOTUNE": "0" if variant is primary else "1", "XOPSAOT_AUTOTUNE_CACHE": f.name}


def peer_row(op: str, shape, nbytes: float, ours, eager, copy_tbps: float, args: tuple = ()) -> dict:
    """Device time per call of ours(*args), eager(*args) and torch.compile(eager)(*args) (bench_queued), and TB/s
    for `nbytes` moved once. Pass the tensors as args when one eager function serves several shapes: compiling a
    closure over them recompiles per shape, and past torch's recompile limit it silently runs eager."""
    row = {"op": op, "shape": shape, "dtype": "bfloat16", "bytes": nbytes}
    row["xopsaot_ms"] = bench_queued(lambda: ours(*args))
    row["torch_eager_ms"] = bench_queued(lambda: eager(*args))
    try:
        compiled = torch.compile(eager, dynamic=False)
        row["torch_compile_ms"] = bench_queued(lambda: compiled(*args))
    except Exception as e:  # torch.compile needs Triton and a C compiler on the machine
        row["torch_compile_error"] = str(e)[-300:]
    for key in [k for k in row if k.endswith("_ms")]:
        row[key.replace("_ms", "_tbps")] = nbytes / row[key] / 1e9
    row["xopsaot_fraction_of_copy"] = row["xopsaot_tbps"] / copy_tbps
    shape_text = shape if isinstance(shape, str) else " x ".join(str(n) for n in shape)
    print(f"{op} {shape_text}: {row['xopsaot_tbps']:.2f} TB/s, eager {row['torch_eager_tbps']:.2f}", flush=True)
    return row


def peer_preamble(title: str, results: dict, script: str) -> list[str]:
    """The opening lines of a peer benchmark's markdown: title, versions, copy bandwidth, the command."""
    env = results["environment"]
    return [
        f"# {title}, {env['device']}, {env['date']}",
        "",
        f"torch {env['torch']}, driver {env['driver']}, xopsaot {env['xopsaot']} (built with Triton "
        f"{env['xopsaot_built_with_triton']}), torch.compile with Triton {env['triton_on_device']}. "
        f"Copy bandwidth {results['copy_tbps']:.2f} TB/s.",
        "",
        f"Command: `python benchmarks/{script} --out benchmarks/results`; raw numbers in the JSON beside it.",
    ]


def peer_table(rows: list[dict]) -> list[str]:
    """The markdown table of peer_row results."""
    lines = [
        "| op | shape | xopsaot TB/s | of copy | torch eager | torch.compile | vs eager | vs compile |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        shape = r["shape"] if isinstance(r["shape"], str) else " x ".join(str(n) for n in r["shape"])
        comp = f"{r['torch_compile_tbps']:.2f}" if "torch_compile_ms" in r else "n/a"
        vs_comp = f"{r['torch_compile_ms'] / r['xopsaot_ms']:.2f}x" if "torch_compile_ms" in r else "n/a"
        lines.append(
            f"| {r['op']} | {shape} | {r['xopsaot_tbps']:.2f} | {r['xopsaot_fraction_of_copy']:.0%} | "
            f"{r['torch_eager_tbps']:.2f} | {comp} | {r['torch_eager_ms'] / r['xopsaot_ms']:.2f}x | {vs_comp} |"
        )
    return lines


def copy_bandwidth() -> float:
    x = torch.empty(2**30 // 2, dtype=torch.bfloat16, device="cuda").normal_()
    y = torch.empty_like(x)
    ms = bench(lambda: y.copy_(x), reps=30)
    return 2 * x.numel() * 2 / ms / 1e9  # TB/s, bytes read + written


def host_overhead() -> dict:
    a = torch.randn(1024, device="cuda")
    b = torch.randn(1024, device="cuda")
    times = host_times_us({"xopsaot.add": lambda: xopsaot.add(a, b), "torch.add": lambda: torch.add(a, b)})
    return {f"{name}_us": us for name, us in times.items()}


COLD_START = """
import time, torch
q = torch.randn(1, 1024, 16, 128, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t0 = time.perf_counter()
{body}
torch.cuda.synchronize()
print((time.perf_counter() - t0) * 1e3)
"""

OURS = """
import xopsaot
out = xopsaot.flash_attn(q, q, q, causal=True)
"""

# Triton JIT compiling the same kernel source on first call (empty cache), for comparison.
JIT = """
import sys, math
sys.path.insert(0, {root!r})
from kernels_src.attention import attn_fwd
o = torch.empty_like(q)
s = q.stride()
grid = ((1024 + 127) // 128, 16, 1)
attn_fwd[grid](q, q, q, o, o, o, o, o, o, o, o, s[0], s[1], s[2], s[0], s[1], s[2], s[0], s[1], s[2], s[0], s[1], s[2],
               0, 0, 0, 0, 0, 0, 0, 1024, 1024, 128, 16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1 << 30, 0, 0, 0,
               1.4426950408889634 / math.sqrt(128), 0.0, 1.0, BLOCK_D=128, PAGED=False, MODS=False,
               BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)
"""


def cold_start(runs: int = 5) -> dict:
    def measure(body: str, env: dict) -> list[float]:
        times = []
        for _ in range(runs):
            out = subprocess.run(
                [sys.executable, "-c", COLD_START.format(body=body)],
                capture_output=True,
                text=True,
                env={**os.environ, **env},
                timeout=600,
            )
            if out.returncode != 0:
                raise RuntimeError(out.stderr[-2000:])
            times.append(float(out.stdout.strip().splitlines()[-1]))
        return times

    ours = measure(OURS, {})
    result = {"xopsaot_ms": statistics.median(ours), "xopsaot_runs_ms": ours}
    try:
        import tempfile

        jit = [measure(JIT.format(root=str(ROOT)), {"TRITON_CACHE_DIR": tempfile.mkdtemp()})[0] for _ in range(3)]
        result.update(triton_jit_ms=statistics.median(jit), triton_jit_runs_ms=jit)
    except Exception as e:  # Triton on the machine may not compile this source; say so instead of a number
        result["triton_jit_error"] = str(e)[-500:]
    return result


def bandwidth_row(op: str, x, passes: int, ours_ms: float, eager_ms: float, copy_tbps: float) -> dict:
    """One memory-bound result; `passes` counts the tensors of x's size read or written once."""
    nbytes = passes * x.numel() * x.element_size()
    return {
        "op": op,
        "shape": list(x.shape),
        "dtype": str(x.dtype).replace("torch.", ""),
        "bytes": nbytes,
        "xopsaot_ms": ours_ms,
        "torch_eager_ms": eager_ms,
        "xopsaot_tbps": nbytes / ours_ms / 1e9,
        "torch_eager_tbps": nbytes / eager_ms / 1e9,
        "xopsaot_fraction_of_copy": nbytes / ours_ms / 1e9 / copy_tbps,
    }


def memory_bound(copy_tbps: float, quick: bool) -> list[dict]:
    rows = []
    shapes = [(16384, 8192)] if quick else [(4096, 4096), (16384, 8192), (65536, 4096)]
    for m, n in shapes:
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        r = torch.randn_like(x)
        w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        cases = {
            "rms_norm": (lambda: xopsaot.rms_norm(x, w), lambda: F.rms_norm(x, (n,), w, 1e-6), 2),
            "add+rms_norm": (lambda: xopsaot.rms_norm(x, w, residual=r), lambda: F.rms_norm(x + r, (n,), w, 1e-6), 4),
            "softmax": (lambda: xopsaot.softmax(x), lambda: torch.softmax(x, -1), 2),
            "add": (lambda: xopsaot.add(x, r), lambda: torch.add(x, r), 3),
        }
        for name, (ours, eager, passes) in cases.items():
            rows.append(bandwidth_row(name, x, passes, bench(ours), bench(eager), copy_tbps))
    for n in (100_000, 262_144):  # long rows: the looped kernels
        x = torch.randn(256, n, device="cuda", dtype=torch.bfloat16)
        ours, eager = bench(lambda: xopsaot.softmax(x)), bench(lambda: torch.softmax(x, -1))
        rows.append(bandwidth_row("softmax", x, 2, ours, eager, copy_tbps))
    return rows


def attention(quick: bool) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    seqlens = [4096, 16384] if quick else [1024, 2048, 4096, 8192, 16384]
    for dim in (128, 64):
        heads = 2048 // dim
        for causal in (False, True):
            for n in seqlens:
                batch = max(1, 16384 // n)
                q, k, v = (torch.randn(batch, n, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
                flops = 4 * batch * heads * n * n * dim / (2 if causal else 1)
                row = {
                    "dim": dim,
                    "causal": causal,
                    "seqlen": n,
                    "batch": batch,
                    "heads": heads,
                    "xopsaot_ms": bench(lambda: xopsaot.flash_attn(q, k, v, causal=causal), reps=20),
                }
                for name, backend in (
                    ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                    ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                ):
                    try:
                        with sdpa_kernel(backend):
                            row[f"{name}_ms"] = bench(
                                lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), reps=20
                            )
                    except RuntimeError as e:
                        row[f"{name}_error"] = str(e)[:200]
                for key in [k for k in row if k.endswith("_ms")]:
                    row[key.replace("_ms", "_tflops")] = flops / row[key] / 1e9
                rows.append(row)
    return rows


def matmul(quick: bool) -> list[dict]:
    rows = []
    sizes = [4096, 8192] if quick else [1024, 2048, 4096, 8192]
    for dtype in (torch.bfloat16, torch.float16):
        for n in sizes:
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            flops = 2 * n**3
            t_ours, t_cublas = bench(lambda: xopsaot.matmul(a, b)), bench(lambda: torch.matmul(a, b))
            t_ours_t = bench(lambda: xopsaot.matmul(a, b.T))
            rows.append(
                {
                    "dtype": str(dtype).replace("torch.", ""),
                    "m": n,
                    "n": n,
                    "k": n,
                    "xopsaot_tflops": flops / t_ours / 1e9,
                    "xopsaot_bT_tflops": flops / t_ours_t / 1e9,
                    "cublas_tflops": flops / t_cublas / 1e9,
                    "xopsaot_ms": t_ours,
                    "cublas_ms": t_cublas,
                }
            )
    return rows


def results_stem(env: dict, what: str = "") -> str:
    """<device model>-<date>[-<what>]: the name results files share (h100-2026-11-22-norms.md)."""
    device = env["device"].upper()
    model = next((m for m in ("H100", "H200", "B200", "A100", "L40S", "L4") if m in device), "gpu").lower()
    return f"{model}-{env['date']}" + (f"-{what}" if what else "")


def write_results(out: Path, stem: str, results: dict, markdown_text: str) -> None:
    """<out>/<stem>.json (the raw numbers) and <out>/<stem>.md (the table)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown_text)


def environment() -> dict:
    props = torch.cuda.get_device_properties(0)
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        driver = "unknown"
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    info = xopsaot.info()
    return {
        "date": datetime.date.today().isoformat(),
        "device": props.name,
        "sm_count": props.multi_processor_count,
        "driver": driver,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton_on_device": triton_version,
        "xopsaot": info["version"],
        "xopsaot_built_with_triton": info["triton_version"],
        "python": platform.python_version(),
    }


def markdown(results: dict) -> str:
    env = results["environment"]
    lines = [
        f"# xops-aot benchmarks: {env['device']}, {env['date']}",
        "",
        f"driver {env['driver']}, torch {env['torch']} (CUDA {env['cuda']}), Triton on the device "
        f"{env['triton_on_device']}, xops-aot {env['xopsaot']} built with Triton "
        f"{env['xopsaot_built_with_triton']}. Medians of CUDA-event timings after warm-up.",
        "",
        f"Measured copy bandwidth (bytes read + written): **{results['copy_tbps']:.2f} TB/s**",
        "",
    ]
    h = results["host"]
    lines += [
        "## Host time per call (1024-element add)",
        "",
        "The calling thread's time per call: the GPU is kept busy so launches never wait for it, and the two",
        "functions alternate burst by burst (median of 41 bursts of 400 calls each).",
        "",
        "| | us per call |",
        "|---|---|",
        f"| xopsaot.add | {h['xopsaot.add_us']:.2f} |",
        f"| torch.add | {h['torch.add_us']:.2f} |",
        "",
    ]
    c = results["cold_start"]
    jit = (
        f"{c['triton_jit_ms']:.0f} ms"
        if "triton_jit_ms" in c
        else f"not measured ({c.get('triton_jit_error', '')[:80]})"
    )
    lines += [
        "## Cold start (fresh process: import + first flash_attn, torch already imported)",
        "",
        f"xopsaot: **{c['xopsaot_ms']:.1f} ms** (runs: {', '.join(f'{t:.1f}' for t in c['xopsaot_runs_ms'])});"
        f" Triton JIT compiling the same kernel on first call: {jit}",
        "",
    ]
    lines += [
        "## Memory-bound ops (bf16)",
        "",
        "| op | shape | xopsaot TB/s | fraction of copy | torch eager TB/s |",
        "|---|---|---|---|---|",
    ]
    for r in results["memory_bound"]:
        lines.append(
            f"| {r['op']} | {r['shape'][0]}x{r['shape'][1]} | {r['xopsaot_tbps']:.2f} | "
            f"{r['xopsaot_fraction_of_copy']:.0%} | {r['torch_eager_tbps']:.2f} |"
        )
    lines += [
        "",
        "## flash_attn forward (bf16, TFLOP/s; causal counts half the FLOPs)",
        "",
        "| head dim | causal | seqlen | batch x heads | xopsaot | SDPA flash | SDPA cuDNN |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["attention"]:
        lines.append(
            f"| {r['dim']} | {r['causal']} | {r['seqlen']} | {r['batch']}x{r['heads']} | "
            f"{r['xopsaot_tflops']:.0f} | {r.get('sdpa_flash_tflops', float('nan')):.0f} | "
            f"{r.get('sdpa_cudnn_tflops', float('nan')):.0f} |"
        )
    lines += [
        "",
        "## matmul (TFLOP/s, square)",
        "",
        "| dtype | size | xopsaot | xopsaot, b transposed | cuBLAS |",
        "|---|---|---|---|---|",
    ]
    for r in results["matmul"]:
        lines.append(
            f"| {r['dtype']} | {r['m']} | {r['xopsaot_tflops']:.0f} | {r['xopsaot_bT_tflops']:.0f} | "
            f"{r['cublas_tflops']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def plots(results: dict, out: Path, stem: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, dim in zip(axes, (128, 64)):
        for causal, style in ((False, "-"), (True, "--")):
            rows = [r for r in results["attention"] if r["dim"] == dim and r["causal"] == causal]
            n = [r["seqlen"] for r in rows]
            for key, color in (("xopsaot", "C0"), ("sdpa_flash", "C1"), ("sdpa_cudnn", "C2")):
                ax.plot(
                    n,
                    [r.get(f"{key}_tflops", float("nan")) for r in rows],
                    style,
                    color=color,
                    marker="o",
                    label=f"{key}{' causal' if causal else ''}",
                )
        ax.set(xscale="log", xlabel="sequence length", ylabel="TFLOP/s", title=f"flash_attn bf16, head dim {dim}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / f"{stem}-attention.png", dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--name", default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    warm_up_gpu()
    results = {"environment": environment()}
    results["copy_tbps"] = copy_bandwidth()
    results["host"] = host_overhead()
    results["cold_start"] = cold_start()
    results["memory_bound"] = memory_bound(results["copy_tbps"], args.quick)
    results["attention"] = attention(args.quick)
    results["matmul"] = matmul(args.quick)
    stem = args.name or results_stem(results["environment"])
    write_results(args.out, stem, results, markdown(results))
    plots(results, args.out, stem)
    print(markdown(results))


if __name__ == "__main__":
    main()
