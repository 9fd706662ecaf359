"""Seconds per Triton compile stage (ttir, ttgir, llir, ptx, cubin) for the first N variants of a kernel at one arch,
compiled as the build compiles them (aot.compile.compile_job, a fresh Triton cache); no GPU needed. The rest of each
variant's time is the front end (AST to TTIR) and Python.

    python benchmarks/experiments/compile_stages.py KERNEL ARCH N    (e.g. attn_fwd 80 4; the build's Triton)
"""

import collections
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # as aot/__main__.py sets them
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()

from triton.backends.nvidia.compiler import CUDABackend  # noqa: E402

from aot import compile as aot_compile  # noqa: E402
from aot.expand import expand, load_kernels  # noqa: E402
from aot.spec import Target  # noqa: E402

seconds = collections.Counter()
add_stages = CUDABackend.add_stages


def timed_stages(self, stages, options, *rest):
    add_stages(self, stages, options, *rest)
    for stage, fn in list(stages.items()):

        def timed(*args, fn=fn, stage=stage):
            start = time.time()
            result = fn(*args)
            seconds[stage] += time.time() - start
            return result

        stages[stage] = timed


CUDABackend.add_stages = timed_stages
name, arch, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
targets = [Target("cuda", a) for a in (80, 90, 100, 120)]
variants = [v for v in expand(load_kernels(ROOT / "kernels_src"), targets) if v.kernel.name == name]
started = time.time()
for v in [v for v in variants if v.target.arch == arch][:count]:
    start = time.time()
    aot_compile.compile_job(aot_compile.job_of(v))
    print(v.label(), round(time.time() - start, 2))
print("total", round(time.time() - started, 1), {k: round(s, 1) for k, s in seconds.items()})
