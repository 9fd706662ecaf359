"""Where one variant's compile time goes: cProfile of triton.compile for one variant of a kernel (its index among
that kernel's variants for one arch, after a first compile that warms the imports), printing the total, the
assembler's share (the ptxas subprocess: posix.waitpid) and Triton's stages (make_ttir, make_ttgir, make_llir,
make_ptx).

    python benchmarks/experiments/compile_stages.py KERNEL ARCH INDEX    (e.g. attn_fwd 90 40)

Runs on the build machine (Triton's compiler, no GPU, no cache).
"""

import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # as python -m aot sets them
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()

from aot.compile import compile_job, job_of  # noqa: E402
from aot.expand import expand, load_kernels  # noqa: E402
from aot.spec import Target  # noqa: E402


def main() -> None:
    name, arch, index = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kernels = [(p, k) for p, k in load_kernels(ROOT / "kernels_src") if k.name == name]
    variants = expand(kernels, [Target("cuda", arch)])
    compile_job(job_of(variants[index % len(variants)]))  # imports and first-use costs
    variant = variants[(index + 1) % len(variants)]
    profile = cProfile.Profile()
    started = time.time()
    profile.enable()
    compile_job(job_of(variant))
    profile.disable()
    total = time.time() - started
    stats = pstats.Stats(profile).stats
    seconds = {}
    for (_, _, function), (_, _, own, cumulative, _) in stats.items():
        if function in ("make_ttir", "make_ttgir", "make_llir", "make_ptx"):
            seconds[function] = cumulative
        elif function == "<built-in method posix.waitpid>":
            seconds["ptxas"] = seconds.get("ptxas", 0) + own
    parts = ", ".join(f"{k} {v:.2f}" for k, v in seconds.items())
    print(f"{variant.label()}: {total:.2f} s; {parts}")


if __name__ == "__main__":
    main()
