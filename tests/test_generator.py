"""The build's generator (aot/) on a made-up kernel set, without Triton: a build narrowed to archs where some kernel
compiles nothing (XOPSAOT_CUDA_ARCHS=80 leaves out every Hopper-only kernel) still expands, and its generated C
still declares and defines every kernel, as the op layer names them all."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def aot(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    for name in [m for m in sys.modules if m == "aot" or m.startswith("aot.")]:
        monkeypatch.delitem(sys.modules, name)
    import aot.codegen
    import aot.compile
    import aot.expand
    import aot.spec

    monkeypatch.setattr(aot.codegen, "triton_version", lambda: "test")  # the build has Triton; this test need not
    return aot


def kernel_set(spec):
    def jit(name, params):  # what the generator reads from a @triton.jit function
        return SimpleNamespace(__name__=name, arg_names=params, params=[])

    args = [spec.ptr("X", "T"), spec.ptr("Y", "T"), spec.i32("n")]
    everywhere = spec.Kernel(
        fn=jit("copy_kernel", ["X", "Y", "n", "BLOCK"]),
        op="copy",
        args=args,
        keys={"T": ["fp16", "fp32"]},
        grid=["cdiv(n, BLOCK)", "1", "1"],
        configs=[spec.Config({"BLOCK": 1024}, when="n >= 4096"), spec.Config({"BLOCK": 256})],
    )
    # A config constexpr in the grid: the generator learns its name only from the kernel's variants.
    hopper_only = spec.Kernel(
        fn=jit("tile_kernel", ["X", "Y", "n", "TILE"]),
        op="copy",
        args=args,
        keys={"T": ["fp16"]},
        grid=["cdiv(n, TILE)", "1", "1"],
        configs=[spec.Config({"TILE": 4096})],
        targets=spec.is_hopper,
        aligned=spec.ALIGNED_ONLY,
    )
    return [everywhere, hopper_only]


@pytest.mark.parametrize("archs", [[80], [90], [100, 120], [80, 90]])
def test_builds_narrowed_to_any_archs_declare_every_kernel(aot, tmp_path, archs):
    kernels = kernel_set(aot.spec)
    targets = [aot.spec.Target("cuda", a) for a in archs]
    variants = aot.expand.expand([(tmp_path / "copy.py", k) for k in kernels], targets)
    metadata = {"name": "k", "num_warps": 4, "shared": 0}
    compiled = [aot.compile.Compiled(v, bytes(64), dict(metadata, name=v.kernel.name), 0.0, False) for v in variants]
    out = tmp_path / "gen"
    manifest = aot.codegen.generate(compiled, kernels, out, {"archs_requested": [t.name for t in targets]})

    tiles = [v for v in manifest["variants"] if v["kernel"] == "tile_kernel"]
    assert len(tiles) == (1 if 90 in archs else 0)
    assert len(manifest["variants"]) == 8 * len(archs) + len(tiles)  # 2 dtypes x 2 configs x hinted or not
    assert [k["name"] for k in manifest["kernels"]] == ["copy_kernel", "tile_kernel"]
    header = (out / "xk_kernels.h").read_text()
    for k in ("copy_kernel", "tile_kernel"):
        assert f"typedef struct xk_{k}_args {{" in header and f"extern const xo_kernel xk_{k} " in header
    assert json.loads((out / "manifest.json").read_text()) == manifest

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the generated tables with")
    # The tables compile, and a program reads from them how many variants each kernel has and its grid.
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "xk_kernels.h"\n'
        "const unsigned char xo_blob[1];\n"
        "int main(void) {\n"
        "  xk_copy_kernel_args a = {0};\n  a.n = 5000;\n  int64_t g[3];\n"
        "  const xo_kernel *k[2] = {&xk_copy_kernel, &xk_tile_kernel};\n"
        "  for (int i = 0; i < 2; ++i) {\n"
        "    g[0] = -1;\n"
        "    if (k[i]->n_variants) k[i]->grid(&a, k[i]->variants[0].consts, 132, g);\n"
        '    printf("%s %d %lld\\n", k[i]->name, k[i]->n_variants, (long long)g[0]);\n'
        "  }\n  return 0;\n}\n"
    )
    exe = tmp_path / "tables"
    include = ["-I", str(ROOT / "include"), "-I", str(ROOT / "csrc"), "-I", str(out)]
    flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-DXOPSAOT_BUILDING"]
    sources = [str(tmp_path / "main.c"), str(out / "xk_kernels.c")]
    subprocess.run([cc, *flags, *include, *sources, "-o", str(exe)], check=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    assert lines[0] == f"copy_kernel {8 * len(archs)} 5"  # the first variant: BLOCK 1024 for n >= 4096
    assert lines[1] == (f"tile_kernel 1 {-(-5000 // 4096)}" if 90 in archs else "tile_kernel 0 -1")
