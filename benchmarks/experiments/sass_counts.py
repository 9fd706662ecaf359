"""Compile attn_fwd_tma (bf16, head dim 128, sm_90) from a kernels file and count SASS instructions per variant;
no GPU needed. --warp-specialize first rewrites the kernel's unmasked key loop as
tl.range(..., warp_specialize=True), to see whether Triton applies it on sm_90.

    python benchmarks/experiments/sass_counts.py [--source kernels_src/attention.py] [--warp-specialize]

attn_fwd_tma, the Triton kernel this measures, was replaced by the Gluon kernel attn_fwd_ws in stop 22 (2026-11-24);
point the script at a kernels file of an earlier commit (`git show e9a27a0:kernels_src/attention.py`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")

from aot.compile import compile_job, job_of  # noqa: E402
from aot.expand import expand, load_kernels  # noqa: E402
from aot.spec import Target  # noqa: E402

OPCODES = ("HGMMA", "FMUL", "FFMA", "FADD", "MUFU", "FMNMX", "SETMAXNREG")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, default=ROOT / "kernels_src" / "attention.py")
    parser.add_argument("--warp-specialize", action="store_true")
    args = parser.parse_args()
    import triton

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("attention_tuning.json", "_rows.py"):
            shutil.copy(ROOT / "kernels_src" / name, tmp)
        text = args.source.read_text()
        if args.warp_specialize:
            text, n = re.subn(r"for start_n in range\(u_lo, u_hi, BLOCK_N\):",
                              "for start_n in tl.range(u_lo, u_hi, BLOCK_N, warp_specialize=True):", text)  # fmt: skip
            assert n == 1, "the unmasked loop was not found"
        (Path(tmp) / "attention.py").write_text(text)
        kernels = [(p, k) for p, k in load_kernels(Path(tmp)) if k.name == "attn_fwd_tma"]
        for v in expand(kernels, [Target("cuda", 90)]):
            if "/bf16/BLOCK_D=128/" not in v.label():
                continue
            binary, _ = compile_job(job_of(v))
            cubin = Path(tmp) / "k.cubin"
            cubin.write_bytes(binary)
            sass = subprocess.run([str(cuobjdump), "-sass", str(cubin)], capture_output=True, text=True).stdout
            counts = {op: len(re.findall(rf"\b{op}\b", sass)) for op in OPCODES}
            print(v.label(), f"{len(binary)} bytes", " ".join(f"{op} {n}" for op, n in counts.items()), flush=True)


if __name__ == "__main__":
    main()
