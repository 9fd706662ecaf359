"""Compile seconds of a random sample of one kernel's variants, one at a time in this process (no cache), with
each variant's target, keys and config as a JSON line; a summary by arch and tile height at the end.

    python benchmarks/experiments/compile_times.py [kernel] [seed] [count]    (default: attn_fwd 1 60)

With --stages, where one variant's compile time goes instead: a cProfile of triton.compile for the variant after
INDEX among the kernel's variants for one arch (INDEX itself is compiled first, to warm the imports), printing the
total, Triton's stages (make_ttir, make_ttgir, make_llir, make_ptx) and the assembler's share (the ptxas subprocess,
posix.waitpid):

    python benchmarks/experiments/compile_times.py --stages KERNEL ARCH INDEX    (e.g. attn_fwd 90 40)

Runs on the build machine (Triton's compiler, no GPU).
"""

import collections
import cProfile
import json
import os
import pstats
import random
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


def stages(name: str, arch: int, index: int) -> None:
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
    seconds = {}
    for (_, _, function), (_, _, own, cumulative, _) in pstats.Stats(profile).stats.items():
        if function in ("make_ttir", "make_ttgir", "make_llir", "make_ptx"):
            seconds[function] = cumulative
        elif function == "<built-in method posix.waitpid>":
            seconds["ptxas"] = seconds.get("ptxas", 0) + own
    parts = ", ".join(f"{k} {v:.2f}" for k, v in seconds.items())
    print(f"{variant.label()}: {total:.2f} s; {parts}")


def main() -> None:
    if sys.argv[1:2] == ["--stages"]:
        stages(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    name = sys.argv[1] if len(sys.argv) > 1 else "attn_fwd"
    seed, count = (int(a) for a in (sys.argv[2:4] + ["1", "60"][len(sys.argv[2:4]) :]))
    kernels = [(p, k) for p, k in load_kernels(ROOT / "kernels_src") if k.name == name]
    variants = expand(kernels, [Target("cuda", a) for a in (80, 90, 100, 120)])
    random.seed(seed)
    rows = []
    for v in random.sample(variants, min(count, len(variants))):
        started = time.time()
        compile_job(job_of(v))
        row = {"arch": v.target.arch, **dict(v.dtypes), **{k: str(x) for k, x in v.keys}, **v.config.constexprs}
        row |= {"warps": v.config.num_warps, "stages": v.config.num_stages, "s": round(time.time() - started, 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"{len(rows)} of {len(variants)} variants, mean {sum(r['s'] for r in rows) / len(rows):.2f} s")
    for label, key in (("arch", lambda r: r["arch"]), ("BLOCK_M", lambda r: r.get("BLOCK_M"))):
        groups = collections.defaultdict(list)
        for r in rows:
            groups[key(r)].append(r["s"])
        print(label, {k: f"{len(s)} x {sum(s) / len(s):.2f} s" for k, s in sorted(groups.items(), key=str)})


if __name__ == "__main__":
    main()
