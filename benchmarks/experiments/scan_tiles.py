"""Tiles of the scans along a first dim (the chunked path: scan_totals_kernel then scan_kernel, split as
csrc/ops/scan.c splits them for the tile's lane count), through the device's Triton JIT of kernels_src: TB/s (x read
and y written once; bursts of ten calls queued behind a sleeping kernel), bf16; each tile's largest error against
torch in brackets.

    python3 benchmarks/experiments/scan_tiles.py [more]
"""

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402


def _load_scan_module():
    """kernels_src/scan.py with n read as int64: the JIT types small Python ints int32, where the wheel passes n as
    int64 (a varlen branch of _segment assigns int64 to what is otherwise n's type)."""
    import importlib.util
    import tempfile

    text = (ROOT / "kernels_src" / "scan.py").read_text()
    old, new = "    first = n * 0\n", "    n = n.to(tl.int64)\n    first = n * 0\n"
    assert old in text
    text = text.replace(old, new)
    path = Path(tempfile.mkdtemp()) / "scan_jit.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("scan_jit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_scan = _load_scan_module()
scan_kernel, scan_totals_kernel = _scan.scan_kernel, _scan.scan_totals_kernel

TILES = [(32, 64, 4), (16, 64, 4), (64, 64, 4), (32, 128, 4), (16, 128, 4), (32, 128, 8), (16, 256, 8), (8, 256, 4)]
MORE = [(32, 64, 4), (64, 64, 4), (128, 64, 4), (128, 64, 8), (256, 64, 8), (64, 32, 4), (128, 32, 4), (64, 64, 2)]


def parts_of(n: int, programs: int, sms: int) -> tuple[int, int]:
    """csrc/ops/scan.c's split: (parts, chunk)."""
    parts = 1
    if programs < 2 * sms and n >= 512:
        parts = min(-(-4 * sms // programs), n // 256)
    per = -(-n // parts)
    chunk = (per + 15) // 16 * 16
    return -(-n // chunk), chunk


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for n, inner in ((4096, 4096), (16384, 8192), (4096, 1024)):
        x = torch.randn(n, inner, device="cuda", dtype=torch.bfloat16)
        ref = torch.cumsum(x.double(), 0)
        y = torch.empty_like(x)
        dummy = torch.zeros(2, device="cuda", dtype=torch.int32)
        results = []
        for block_t, block_i, warps in MORE if "more" in sys.argv else TILES:
            lanes = -(-inner // block_i)
            parts, chunk = parts_of(n, lanes, sms)
            w = torch.empty(parts * inner, device="cuda", dtype=torch.int64)
            common = dict(BLOCK_T=block_t, BLOCK_I=block_i, num_warps=warps)  # noqa: C408

            def call():
                if parts > 1:
                    scan_totals_kernel[(1, lanes, parts)](x, dummy, w, n, inner, inner, 0, 0, 0, 0, chunk, **common)
                scan_kernel[(1, lanes, parts)](x, y, dummy, w, n, inner, inner, 0, 0, 0, 0, chunk, CHUNKED=parts > 1,
                                               **common)  # fmt: skip

            y.fill_(float("nan"))
            call()
            err = ((y.double() - ref).abs() / (1 + ref.abs())).max().item()
            ms = bench_queued(call)
            results.append(f"{block_t}x{block_i}/{warps} p{parts} {2 * x.numel() * 2 / ms / 1e9:.2f} ({err:.0e})")
        print(f"{n} x {inner}: " + " | ".join(results), flush=True)


if __name__ == "__main__":
    main()
