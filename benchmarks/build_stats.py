"""Build figures on the machine that runs it: clean build time, no-op rebuild time, wheel and installed size.

    python benchmarks/build_stats.py [--out benchmarks/results]

Clean: `pip wheel .` with build isolation (a fresh build environment: installs Triton and scikit-build-core) after
removing build/ (the CMake build and the compile cache). No-op: the same command again, and once without build
isolation (`--no-build-isolation`, in an environment that already has the build requirements).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed_wheel(extra: list[str], out: Path) -> tuple[float, Path, str]:
    for old in out.glob("*.whl"):
        old.unlink()
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-w", str(out), "-v", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(result.stdout[-3000:] + result.stderr[-3000:])
    output = (result.stdout + result.stderr).splitlines()
    aot = [line.strip() for line in output if line.strip().startswith("aot:")]
    return seconds, next(out.glob("*.whl")), "\n".join(aot)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    env_archs = os.environ.get("XOPSAOT_CUDA_ARCHS")
    if env_archs:
        raise SystemExit("unset XOPSAOT_CUDA_ARCHS: the figures are for the full build")
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    wheels = Path(tempfile.mkdtemp())
    clean, wheel, clean_log = timed_wheel([], wheels)
    noop_isolated, _, noop_log = timed_wheel([], wheels)
    noop, _, _ = timed_wheel(["--no-build-isolation"], wheels)
    with zipfile.ZipFile(wheel) as z:
        installed = sum(i.file_size for i in z.infolist())
        library = z.getinfo("xopsaot/libxopsaot.so").file_size
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    results = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores ({cpu}), Linux {platform.release()}",
        "python": platform.python_version(),
        "wheel": wheel.name,
        "wheel_bytes": wheel.stat().st_size,
        "installed_bytes": installed,
        "library_bytes": library,
        "clean_build_s": clean,
        "noop_rebuild_isolated_s": noop_isolated,
        "noop_rebuild_s": noop,
        "clean_build_log": clean_log,
        "noop_build_log": noop_log,
    }
    stem = f"build-{results['date']}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n")
    md = f"""# Build figures, {results["date"]}

Machine: {results["machine"]}; Python {results["python"]}. Command: `pip wheel . --no-deps` (see
`benchmarks/build_stats.py`). All four CUDA targets (sm_80, sm_90a, sm_100a, sm_120a).

| | |
|---|---|
| clean build (fresh build environment, empty compile cache) | {clean:.0f} s |
| no-op rebuild, same command (pip still sets up the build environment) | {noop_isolated:.1f} s |
| no-op rebuild, `--no-build-isolation` | {noop:.1f} s |
| wheel `{wheel.name}` | {wheel.stat().st_size / 1e6:.1f} MB |
| installed (unpacked) | {installed / 1e6:.1f} MB, of which libxopsaot.so {library / 1e6:.1f} MB |

Generator output of the clean build:

```
{clean_log}
```

and of the no-op rebuild:

```
{noop_log or "(the generator did not run: nothing changed)"}
```
"""
    (args.out / f"{stem}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
