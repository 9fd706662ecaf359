"""Scans along a dim with lanes after it (cumsum and logcumsumexp along dim 0 of 2-D tensors), kernels_src/scan.py's
chunked path (scan_totals_kernel then scan_kernel), through the device's Triton JIT: today's source (`new`) against
another copy (`old`, e.g. `git show REV:kernels_src/scan.py > FILE`, or a trial patched in from
scan_lanes_row_loop.diff), for tiles BLOCK_T x BLOCK_I / warps and split policies (programs per multiprocessor, the
least chunk). TB/s (x read and y written once; bursts of ten calls queued behind a sleeping kernel), bf16; each
run's largest error against float64 torch, relative to 1 + |ref|, in brackets. The JIT specializes inner (a multiple
of 16 here) where the wheel's variants take the hint from `pitch`: its timings of unhinted sources read high.

    python3 benchmarks/experiments/scan_lines.py [--old FILE] [--tiles T/I/W ...] [--policies PER_SM/MIN_CHUNK ...]
        [--old-tiles T/I/W ...] [--old-policies ...] [--skip-new]
"""

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]


def scan_module(path: Path):
    """A kernels_src/scan.py with n read as int64 (the JIT types small ints int32; the wheel passes int64)."""
    text = path.read_text()
    old, new = "    first = n * 0\n", "    n = n.to(tl.int64)\n    first = n * 0\n"
    assert old in text
    copy = Path(tempfile.mkdtemp()) / f"scan_{path.stem}.py"
    copy.write_text(text.replace(old, new))
    spec = importlib.util.spec_from_file_location(copy.stem, copy)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parts_of(n: int, programs: int, sms: int, per_sm: int, min_chunk: int) -> tuple[int, int]:
    """csrc/ops/scan.c's split with its two constants given: (parts, chunk)."""
    parts = 1
    if programs < 2 * sms and n >= 2 * min_chunk:
        parts = min(-(-per_sm * sms // programs), n // min_chunk)
    chunk = (-(-n // parts) + 15) // 16 * 16
    return -(-n // chunk), chunk


def main() -> None:
    import torch
    from run import bench_queued, copy_bandwidth, warm_up_gpu

    parser = argparse.ArgumentParser()
    parser.add_argument("--old", type=Path)
    parser.add_argument("--tiles", nargs="*", default=["8/256/2", "16/256/2", "8/512/4", "16/128/1", "32/64/4"])
    parser.add_argument("--policies", nargs="*", default=["4/256", "4/64", "8/64"])
    parser.add_argument("--old-tiles", nargs="*", default=["32/64/4"])
    parser.add_argument("--old-policies", nargs="*", default=["4/256"])
    parser.add_argument("--skip-new", action="store_true")
    args = parser.parse_args()
    sources = {} if args.skip_new else {"new": scan_module(ROOT / "kernels_src" / "scan.py")}
    if args.old:
        sources["old"] = scan_module(args.old)
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for n, inner in ((4096, 4096), (16384, 8192), (4096, 1024)):
        x = torch.randn(n, inner, device="cuda", dtype=torch.bfloat16)
        refs = {0: torch.cumsum(x.double(), 0), 1: torch.logcumsumexp(x.double(), 0)}
        y = torch.empty_like(x)
        dummy = torch.zeros(2, device="cuda", dtype=torch.int32)
        for name, module in sources.items():
            tiles = args.old_tiles if name == "old" else args.tiles
            policies = args.old_policies if name == "old" else args.policies
            for op, label in ((0, "cumsum"), (1, "logcumsumexp")):
                results = []
                for tile in tiles:
                    block_t, block_i, warps = map(int, tile.split("/"))
                    for policy in policies:
                        per_sm, min_chunk = map(int, policy.split("/"))
                        lanes = -(-inner // block_i)
                        parts, chunk = parts_of(n, lanes, sms, per_sm, min_chunk)
                        w = torch.empty(2 * parts * inner, device="cuda", dtype=torch.int64)
                        common = dict(BLOCK_T=block_t, BLOCK_I=block_i, num_warps=warps)  # noqa: C408

                        # the lanes' pitch where the source takes one (this stop's), after inner
                        shape = (n, inner, inner) if "pitch" in module.scan_kernel.arg_names else (n, inner)

                        def call():
                            if parts > 1:
                                module.scan_totals_kernel[(1, lanes, parts)](x, dummy, w, *shape, 0, 0, 0, op, chunk,
                                                                             **common)  # fmt: skip
                            module.scan_kernel[(1, lanes, parts)](x, y, dummy, w, *shape, 0, 0, 0, op, chunk,
                                                                  CHUNKED=parts > 1, **common)  # fmt: skip

                        y.fill_(float("nan"))
                        call()
                        err = ((y.double() - refs[op]).abs() / (1 + refs[op].abs())).max().item()
                        ms = bench_queued(call)
                        results.append(f"{tile} {policy} p{parts} {2 * x.numel() * 2 / ms / 1e9:.2f} ({err:.0e})")
                print(f"{name} {label} {n} x {inner}: " + " | ".join(results), flush=True)


if __name__ == "__main__":
    main()
