"""Registers per thread and spill bytes (cuobjdump -res-usage) of a kernel's sm_90 variants, compiled from a kernels
directory; no GPU needed. On rows held whole the register count decides how many programs fit on a multiprocessor
(32 per thread or fewer: two programs of 1024 threads), which is why stop 21 checked it on every change there.

    python benchmarks/experiments/variant_registers.py KERNEL LABEL_REGEX [--source kernels_src]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")

import triton  # noqa: E402

from aot.compile import compile_job, job_of  # noqa: E402
from aot.expand import expand, load_kernels  # noqa: E402
from aot.spec import Target  # noqa: E402


def compiled(kernel: str, label_regex: str, source: Path):
    """(label, cubin bytes) of each sm_90 variant of `kernel` whose label matches, compiled from `source`. The
    package kernels_src is pointed at `source` first, so that a kernels file importing another (activation.py
    imports attention.py) gets source's copy, not this tree's."""
    package = types.ModuleType("kernels_src")
    package.__path__ = [str(source.resolve())]
    sys.modules["kernels_src"] = package
    kernels = [(p, k) for p, k in load_kernels(source) if k.name == kernel]
    for variant in expand(kernels, [Target("cuda", 90)]):
        if re.search(label_regex, variant.label()):
            yield variant.label(), compile_job(job_of(variant))[0]


def cuobjdump(binary: bytes, flag: str) -> str:
    """cuobjdump's output for a cubin (flag: -res-usage, -sass)."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(binary)
        return subprocess.run([str(tool), flag, str(cubin)], capture_output=True, text=True).stdout


INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")  # a SASS line of cuobjdump's: its offset and its text


def opcode(text: str) -> str:
    """An instruction's opcode with its modifiers (BAR.SYNC.DEFER_BLOCKING), past any predicate."""
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]


def compiled_from_command_line():
    """compiled() of the command line's KERNEL LABEL_REGEX [--source DIR] (this script's and sass_loops.py's)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("kernel")
    parser.add_argument("label_regex")
    parser.add_argument("--source", type=Path, default=ROOT / "kernels_src")
    args = parser.parse_args()
    return compiled(args.kernel, args.label_regex, args.source)


def main() -> None:
    for label, binary in compiled_from_command_line():
        usage = cuobjdump(binary, "-res-usage")
        regs, stack = re.search(r"REG:(\d+)", usage).group(1), re.search(r"STACK:(\d+)", usage).group(1)
        print(f"{label} registers {regs} spill bytes {stack}", flush=True)


if __name__ == "__main__":
    main()
