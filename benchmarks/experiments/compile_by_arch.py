"""Compile every variant into a compile cache one arch at a time, as the build does (aot.compile.compile_all, two
workers on two cores), and print each arch's wall seconds and each kernel's compile seconds per arch.

    python benchmarks/experiments/compile_by_arch.py CACHE_DIR [ARCHS]    (default archs: 90,80,100,120)

A cache filled so serves later builds: `pip wheel . -C cmake.define.XOPSAOT_AOT_CACHE=CACHE_DIR`. Runs on the build
machine (Triton's compiler, no GPU).
"""

import collections
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # as python -m aot sets them
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")

from aot.compile import Cache, compile_all  # noqa: E402
from aot.expand import expand, load_kernels  # noqa: E402
from aot.spec import Target  # noqa: E402


def main() -> None:
    cache = Cache(Path(sys.argv[1]))
    archs = [int(a) for a in (sys.argv[2] if len(sys.argv) > 2 else "90,80,100,120").split(",")]
    kernels = load_kernels(ROOT / "kernels_src")
    seconds = collections.defaultdict(dict)
    for arch in archs:
        variants = expand(kernels, [Target("cuda", arch)])
        start = time.time()
        compiled = compile_all(variants, cache, os.cpu_count() or 1, 900, log=lambda _: None)
        by_kernel = collections.Counter()
        for c in compiled:
            by_kernel[c.variant.kernel.name] += c.seconds
        seconds[arch] = by_kernel
        cached = sum(c.cached for c in compiled)
        print(f"sm_{arch}: {len(variants)} variants ({cached} cached), {time.time() - start:.0f} s wall, "
              f"{sum(by_kernel.values()):.0f} compile seconds", flush=True)  # fmt: skip
    names = sorted({k for per in seconds.values() for k in per}, key=lambda k: -sum(p[k] for p in seconds.values()))
    print("kernel, " + ", ".join(f"sm_{a}" for a in archs) + ", total (compile seconds)")
    for name in names:
        row = [seconds[a][name] for a in archs]
        print(f"{name}, " + ", ".join(f"{s:.0f}" for s in row) + f", {sum(row):.0f}")


if __name__ == "__main__":
    main()
