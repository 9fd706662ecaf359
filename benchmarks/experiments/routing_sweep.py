"""The variant and grid each call of a sweep takes in the installed wheel, under the tests' fake CUDA driver (no
GPU): softmax family, every row-norm form, group_norm and scan over lengths and row counts around their routing
rules' edges, for the sm_90 device the fake reports. One JSON line per call; run it under two wheels and compare
the outputs to show that a change of the routing's form left its choices alone.

    cc -shared -fPIC -O1 -o /tmp/libcuda.so.1 tests/fake_cuda/fake_cuda.c -lpthread
    XOPSAOT_CUDA_DRIVER=/tmp/libcuda.so.1 FAKE_CUDA_DEVICES=90 python benchmarks/experiments/routing_sweep.py > a.jsonl
"""

import ctypes
import json
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests" / "test_launch_path.py"
source = TESTS.read_text()
start = source.index('PRELUDE = """') + len('PRELUDE = """')
helpers: dict = {}
exec(source[start : source.index('"""', start)], helpers)  # the tests' helpers, run against the fake driver
fake, tensor, error_of = helpers["fake"], helpers["tensor"], helpers["error_of"]
BY_ADDRESS, _library = helpers["BY_ADDRESS"], helpers["_library"]

A, B, C = 0x7F0000000000, 0x7F1000000000, 0x7F2000000000
LENGTHS = [1, 17, 4096, 8191, 8192, 8193, 8200, 16384, 16392, 32768, 32776, 40000, 57344, 57352, 65536, 73728, 81920,
           114688, 114696, 131072, 131080, 196608, 229376, 262144, 262152, 300000]  # fmt: skip
ROWS = [1, 131, 132, 527, 528, 1055, 1056, 2111, 2112, 4096]
NORM_FORMS = [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0), (0, 0, 1, 1), (1, 0, 1, 0), (0, 0, 1, 0)]
GROUPS = [((2, 512, 128, 128), 32), ((4, 512, 128, 128), 32), ((16, 256, 64, 64), 32), ((12, 256, 64, 64), 32),
          ((64, 512, 16, 16), 32), ((1, 64, 128, 128), 32), ((8, 320, 64, 64), 32), ((13, 512, 64, 64), 32),
          ((600, 4, 4096), 1), ((1024, 5, 8192), 1), ((2, 64, 16, 16), 32), ((1, 8, 3), 2),
          ((3, 32, 100, 100), 4)]  # fmt: skip
SCANS = [((4096, 4096), 0), ((4096, 4096), 1), ((16,), 0), ((100000,), 0), ((64, 3, 5000), 1), ((8, 70000), 0),
         ((2, 1000, 700), 1)]  # fmt: skip
seen = 0


def record(call: str, fn) -> None:
    global seen
    error = error_of(fn)
    launched = []
    for i in range(seen, fake.fake_cuda_launch_count()):
        launch = fake.fake_cuda_launch(i).contents
        launched.append(f"{BY_ADDRESS[launch.image]['label']} grid={list(launch.grid)}")
    seen = fake.fake_cuda_launch_count()
    print(json.dumps({"call": call, "error": error and error[1], "launches": launched}))


def norm_call(x, w, rows, n, dtype, norm, residual, gate, pre):
    options = _library.NormOptions(norm, 1e-5, 0.0, 0, pre)
    out = tensor((rows, n), dtype, B)
    tensors = (x, w, w if norm else None, out if residual else None, tensor((rows, n), dtype, C) if gate else None,
               out, tensor((rows, n), dtype, A) if residual else None)  # fmt: skip
    return lambda: _library.call("xopsaot_norm", tensors, ctypes.byref(options), 0)


for dtype in ("float16", "bfloat16", "float32"):
    for n in LENGTHS:
        for rows in ROWS:
            x = tensor((rows, n), dtype, A)
            for kind in (0, 1, 2):
                out = tensor((rows,) if kind == 2 else (rows, n), dtype, B)
                record(f"softmax {dtype} {rows}x{n} kind={kind}",
                       lambda: _library.call("xopsaot_softmax_family", (x, out), kind, 0))  # fmt: skip
            for form in NORM_FORMS:
                record(f"norm {dtype} {rows}x{n} norm/residual/gate/pre={form}",
                       norm_call(x, tensor((n,), dtype, C), rows, n, dtype, *form))  # fmt: skip
    for shape, groups in GROUPS:
        x, out = tensor(shape, dtype, A), tensor(shape, dtype, B)
        record(f"group_norm {dtype} {shape} {groups}",
               lambda: _library.call("xopsaot_group_norm", (x, None, None, out), groups, 1e-5, 0))  # fmt: skip
    for shape, dim in SCANS:
        for op in (0, 1):
            x, out = tensor(shape, dtype, A), tensor(shape, dtype, B)
            record(f"scan {dtype} {shape} dim={dim} op={op}",
                   lambda: _library.call("xopsaot_scan", (x, out, None), dim, op, 0, 0))  # fmt: skip
