"""examples/flash_attn.c builds against the installed header and library. Without a GPU it must report the
library's reason and exit 2; the GPU run is in test_gpu.py."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from xopsaot import _library

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "flash_attn.c"


def build_example(cc: str) -> Path:
    package = _library.PACKAGE_DIR
    exe = Path(tempfile.mkdtemp(prefix="xopsaot-example-")) / "flash_attn"
    subprocess.run(
        [
            cc,
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{package / 'include'}",
            str(EXAMPLE),
            f"-L{package}",
            "-lxopsaot",
            f"-Wl,-rpath,{package}",
            "-ldl",
            "-lm",
            "-o",
            str(exe),
        ],
        check=True,
    )
    return exe


def test_example_builds_and_reports_without_gpu():
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    exe = build_example(cc)
    from conftest import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present: test_gpu.py runs the example")
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout.startswith("no usable GPU: ") and len(out.stdout) > len("no usable GPU: \n")
