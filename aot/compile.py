"""Compile variants with triton.compile for explicit targets: no GPU or driver needed.

Results are cached by content (kernel source hash, signature, constexprs, hints, options, target, Triton and
ptxas versions), so an unchanged rebuild compiles nothing. Misses run in worker processes, one per core by
default; each compile has a time limit, after which its worker (and the ptxas it started) is killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from .expand import Variant, import_file

# Everything the generator reads from a compiled kernel's metadata.
METADATA_FIELDS = (
    "name",
    "shared",
    "num_warps",
    "num_ctas",
    "global_scratch_size",
    "global_scratch_align",
    "profile_scratch_size",
    "profile_scratch_align",
    "launch_cooperative_grid",
    "launch_pdl",
    "tmem_size",
    "tensordesc_meta",  # per host TMA descriptor argument: element type, swizzle, box (what the launcher encodes)
)


@dataclass
class Compiled:
    variant: Variant
    binary: bytes
    metadata: dict[str, Any]
    seconds: float
    cached: bool


PTXAS_OVERRIDE = "TRITON_PTXAS_BLACKWELL_PATH"  # the assembler Triton uses for sm_90 and newer


def ptxas_env(target) -> dict[str, str]:
    """sm_80 and sm_90 are assembled with the ptxas 12.9 Triton bundles, whose cubins (ELF ABI v7) load on
    any CUDA 12 driver; Triton's newer ptxas writes ABI v8, which needs a CUDA 13 driver. Blackwell targets
    keep Triton's default assembler, which they need."""
    if target.backend != "cuda" or target.arch >= 100:
        return {}
    import triton

    legacy = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return {PTXAS_OVERRIDE: str(legacy)} if legacy.exists() else {}


@contextlib.contextmanager
def assembler_env(env: dict[str, str]):
    """Run the block with Triton's assembler override set as `env` says (from ptxas_env), then restore it."""
    saved = os.environ.pop(PTXAS_OVERRIDE, None)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.pop(PTXAS_OVERRIDE, None)
        if saved is not None:
            os.environ[PTXAS_OVERRIDE] = saved


def tool_version(target) -> str:
    """The assembler's version, part of the cache key and the manifest."""
    if target.backend != "cuda":
        return "amd"
    import triton.knobs as knobs

    with assembler_env(ptxas_env(target)):
        tool = knobs.nvidia.ptxas if target.arch < 90 else knobs.nvidia.ptxas_blackwell
        return f"ptxas {tool.version}"


def job_of(variant: Variant) -> dict[str, Any]:
    """Everything a worker needs to compile one variant, picklable."""
    return {
        "source": str(variant.source),
        "kernel": variant.kernel.name,
        "signature": variant.signature(),
        "constexprs": variant.compile_constexprs,
        "attrs": variant.attrs(),
        "options": {
            "num_warps": variant.config.num_warps,
            "num_stages": variant.config.num_stages,
            **({"launch_pdl": True} if variant.pdl else {}),
            **({"maxnreg": variant.config.maxnreg} if variant.config.maxnreg else {}),
        },
        "target": (variant.target.backend, variant.target.arch, 32 if variant.target.backend == "cuda" else 64),
        "env": ptxas_env(variant.target),
    }


def cache_key(variant: Variant, tool: str) -> str:
    import triton

    job = job_of(variant)
    text = json.dumps(
        {
            "fn": variant.kernel.fn.cache_key,
            "signature": job["signature"],
            "constexprs": {k: repr(v) for k, v in sorted(job["constexprs"].items())},
            "attrs": sorted((list(k), v) for k, v in job["attrs"].items()),
            "options": job["options"],
            "target": list(job["target"]),
            "triton": triton.__version__,
            "tool": tool,
            "fp_fusion": os.environ.get("TRITON_DEFAULT_FP_FUSION"),
            "line_info": os.environ.get("TRITON_DISABLE_LINE_INFO"),
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def compile_job(job: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """Runs in a worker: compile one variant and return (binary, metadata)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction

    module = import_file(Path(job["source"]))
    fn = next(k.fn for k in module.KERNELS if k.name == job["kernel"])
    source = GluonASTSource if isinstance(fn, GluonJITFunction) else ASTSource  # Triton's two front ends
    src = source(fn, job["signature"], job["constexprs"], job["attrs"])
    target = GPUTarget(*job["target"])
    with assembler_env(job["env"]):
        compiled = triton.compile(src, target=target, options=job["options"])
    binary = compiled.asm["cubin" if target.backend == "cuda" else "hsaco"]
    md = compiled.metadata._asdict()
    return binary, {k: md.get(k, 0) for k in METADATA_FIELDS}


def _worker(conn) -> None:
    os.setpgrp()  # so a timeout can kill ptxas along with the worker
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        job_id, job = message
        try:
            conn.send((job_id, True, compile_job(job)))
        except Exception:  # reported to the parent with the variant's label
            conn.send((job_id, False, traceback.format_exc(limit=8)))


class Cache:
    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.directory / f"{key}.bin", self.directory / f"{key}.json"

    def get(self, key: str):
        binary, meta = self._paths(key)
        if binary.exists() and meta.exists():
            return binary.read_bytes(), json.loads(meta.read_text())
        return None

    def put(self, key: str, binary: bytes, metadata: dict[str, Any]) -> None:
        bpath, mpath = self._paths(key)
        for path, data in ((bpath, binary), (mpath, json.dumps(metadata).encode())):
            tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)


def compile_all(variants: list[Variant], cache: Cache, jobs: int, timeout: float, log=print) -> list[Compiled]:
    """Compile every variant (cache first), in parallel, each within `timeout` seconds."""
    tools = {}
    keys = []
    for v in variants:
        if v.target not in tools:
            tools[v.target] = tool_version(v.target)
        keys.append(cache_key(v, tools[v.target]))

    results: list[Compiled | None] = [None] * len(variants)
    misses = []
    for i, (variant, key) in enumerate(zip(variants, keys)):
        hit = cache.get(key)
        if hit is None:
            misses.append(i)
        else:
            results[i] = Compiled(variant, hit[0], hit[1], 0.0, True)
    log(f"aot: {len(variants)} variants, {len(variants) - len(misses)} cached, {len(misses)} to compile")
    if misses:

        def store(i: int) -> None:  # as each result arrives, so an interrupted build keeps what it compiled
            cache.put(keys[i], results[i].binary, results[i].metadata)

        failures = _run_pool(variants, misses, jobs, timeout, results, log, store)
        if failures:
            raise RuntimeError("aot: compilation failed:\n" + "\n".join(failures))
    for r in results:
        r.metadata["tool"] = tools[r.variant.target]
    return results


def _run_pool(variants, indices, jobs, timeout, results, log, on_result) -> list[str]:
    ctx = mp.get_context("spawn")
    triton_cache = tempfile.mkdtemp(prefix="xopsaot-triton-")
    previous_cache = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = triton_cache  # inherited by the workers; our cache replaces Triton's
    pending = list(reversed(indices))
    workers = {}  # conn -> [process, job index or None, start time]
    failures = []
    done = 0
    started = time.time()

    def spawn():
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        proc.start()
        child.close()
        workers[parent] = [proc, None, 0.0]
        return parent

    def feed(conn):
        if pending:
            i = pending.pop()
            workers[conn][1:] = [i, time.time()]
            conn.send((i, job_of(variants[i])))
        else:
            workers[conn][1] = None

    for _ in range(max(1, min(jobs, len(indices)))):
        spawn()
    for conn in list(workers):
        feed(conn)
    try:
        while any(w[1] is not None for w in workers.values()):
            ready = wait([c for c, w in workers.items() if w[1] is not None], timeout=1.0)
            for conn in ready:
                proc, i, t0 = workers[conn]
                try:
                    job_id, ok, payload = conn.recv()
                except EOFError:
                    failures.append(f"{variants[i].label()}: worker died (exit code {proc.exitcode})")
                    del workers[conn]
                    feed(spawn())
                    continue
                if ok:
                    binary, metadata = payload
                    results[job_id] = Compiled(variants[job_id], binary, metadata, time.time() - t0, False)
                    on_result(job_id)
                else:
                    failures.append(f"{variants[job_id].label()}:\n{payload}")
                done += 1
                if done % 25 == 0 or done == len(indices):
                    log(f"aot: compiled {done}/{len(indices)} in {time.time() - started:.0f}s")
                feed(conn)
            now = time.time()
            for conn, (proc, i, t0) in list(workers.items()):
                if i is not None and now - t0 > timeout:
                    failures.append(f"{variants[i].label()}: timed out after {timeout:.0f}s")
                    os.killpg(proc.pid, signal.SIGKILL)
                    del workers[conn]
                    feed(spawn())
    finally:
        for conn in workers:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc, _, _ in workers.values():
            proc.join(timeout=5)
            if proc.is_alive():
                os.killpg(proc.pid, signal.SIGKILL)
        # Triton's own cache of this build's intermediates (about 1 GB for every arch) was left in /tmp before
        shutil.rmtree(triton_cache, ignore_errors=True)
        if previous_cache is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = previous_cache
    return failures
