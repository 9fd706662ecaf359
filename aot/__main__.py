"""python -m aot: compile kernels_src/ ahead of time and generate the C sources CMake links.

    python -m aot --kernels kernels_src --out build/gen [--archs 80,90] [--jobs N] [--cache DIR]

Targets: CUDA sm_80, sm_90, sm_100, sm_120 unless --archs (or XOPSAOT_CUDA_ARCHS, ';' or ',' separated)
narrows them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

DEFAULT_CUDA_ARCHS = (80, 90, 100, 120)


def parse_archs(text: str | None) -> list[int]:
    if not text:
        return list(DEFAULT_CUDA_ARCHS)
    archs = []
    for part in text.replace(";", ",").split(","):
        part = part.strip().removeprefix("sm_").rstrip("a")
        if part:
            archs.append(int(part))
    return archs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aot", description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=Path, required=True, help="folder of kernel files")
    parser.add_argument("--out", type=Path, required=True, help="folder for generated sources")
    parser.add_argument("--archs", default=os.environ.get("XOPSAOT_CUDA_ARCHS"), help="CUDA archs, e.g. 80,90")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("XOPSAOT_AOT_JOBS", os.cpu_count() or 1)))
    parser.add_argument("--cache", type=Path, default=None, help="compile cache (default: <out>/../aot-cache)")
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("XOPSAOT_AOT_TIMEOUT", 600)))
    args = parser.parse_args(argv)

    # Explicit, as Triton 3.9 asks (its default changes in 3.10): keep FMA contraction on.
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    # no source line tables in the binaries: a third of the size (and of the assembler's time) for attention
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")

    from .codegen import generate
    from .compile import Cache, compile_all
    from .expand import expand, load_kernels
    from .spec import Target

    started = time.time()
    targets = [Target("cuda", a) for a in parse_archs(args.archs)]
    kernels = load_kernels(args.kernels)
    variants = expand(kernels, targets)
    cache = Cache(args.cache or args.out.parent / "aot-cache")
    compiled = compile_all(variants, cache, args.jobs, args.timeout)
    requested = {
        "archs_requested": [t.name for t in targets],
        "archs_default": [f"sm_{a}" for a in DEFAULT_CUDA_ARCHS],
    }
    manifest = generate(compiled, [k for _, k in kernels], args.out, requested)
    size = manifest["blob_size"]
    print(
        f"aot: {len(compiled)} variants of {len(kernels)} kernels for {', '.join(manifest['archs'])}; "
        f"{size / 1e6:.1f} MB of binaries; {time.time() - started:.1f}s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
