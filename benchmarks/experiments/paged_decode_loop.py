"""Where does paged decode lose to the contiguous cache at the one-wave config (16 rows, 64-key blocks, 4 warps, 3
stages)? A minimal decode (one (sequence, key head, slice) program per GQA group, partials only, full blocks, GQA
32:8 x head dim 128 bf16, constexpr layout) in several forms of its block loop, beside the shipped attn_fwd through
the same JIT at the same config and the installed wheel's whole step:

- contiguous: the contiguous cache (the ceiling of this loop);
- rows: the shipped paged loop's addressing (_paged_full_blocks: the table read CHUNK pages at a time, each key
  row's page taken with tl.gather; keys and values share one row offset);
- rows masked: the same with attn_fwd's head-dim mask and the page ids clamped into the pool;
- rows runtime stride: the same with a run-time row stride;
- rows in attn_fwd's loops: the same inside attn_fwd's loop structure (a masked edge loop before, a general loop
  for pages that do not nest after; neither runs here);
- runs: a block as BLOCK_N / SUB runs of SUB rows, one page id per run (tl.gather of the run's ids), loaded as a
  (runs, SUB, D) tensor reshaped to (BLOCK_N, D); runs direct: the runs' ids loaded inside the loop.

Pools of pages of 16 and 128 tokens, in order and shuffled (paged_locality.py's tables). TB/s of KV read by the
slice pass in CUDA graphs (the wheel's: its whole step at its own choice); each minimal form's largest error against
SDPA (partials merged in torch) in brackets.

    python3 benchmarks/experiments/paged_decode_loop.py [--kernels FILE,...] [--configs BN/WARPS/STAGES/SUB/CHUNK ...]
        [--modes NAME ...] [--wide] [--sass]

--kernels adds attn_fwd from other copies of kernels_src/attention.py (`git show REV:kernels_src/attention.py >
FILE`, with attention_tuning.json beside it); --wide times 16 x 4k and 1 x 32k at two slice counts each; --sass
prints the modes' SASS loops instead, compiled here for sm_90 (no GPU needed).
"""

import argparse
import importlib.util
import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from decode_packed_heads import _fold  # noqa: E402  (the online-softmax step; every key visible here)

HEADS, HEADS_K, DIM = 32, 8, 128
MODES = {"contiguous": 0, "rows": 1, "rows masked": 2, "rows runtime stride": 3, "rows in attn_fwd's loops": 4,
         "runs": 5, "runs direct": 6}  # fmt: skip


@triton.jit
def paged_decode(Q, K, V, Part, Lse, Lengths, Table, stride_kb, stride_kp, stride_tb, page_size, max_pages,
                 batch, num_splits, qk_scale, head_dim, HK: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr, SUB: tl.constexpr,
                 CHUNK: tl.constexpr):  # fmt: skip
    head_k = tl.program_id(1) // num_splits
    split = tl.program_id(1) % num_splits
    b = tl.program_id(2)
    rows = tl.arange(0, BM)
    row_ok = rows < GROUP
    head = head_k * GROUP + rows
    dims = tl.arange(0, D)
    q = tl.load(Q + (b * HK * GROUP + head).to(tl.int64)[:, None] * D + dims[None, :], mask=row_ok[:, None])
    stride_ks = HK * D
    k_len = tl.load(Lengths + b)
    per = tl.cdiv(tl.cdiv(k_len, BN), num_splits)
    lo = split * per * BN
    hi = tl.minimum(lo + per * BN, k_len // BN * BN)  # full blocks only (the benchmark's lengths are multiples)
    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    K += head_k * D
    V += head_k * D
    Table += b.to(tl.int64) * stride_tb
    if MODE == 0:
        offs = tl.arange(0, BN).to(tl.int64)[:, None] * stride_ks + dims[None, :]
        base = b.to(tl.int64) * stride_kb
        for n in range(lo, hi, BN):
            k = tl.load(K + base + n * stride_ks + offs)
            v = tl.load(V + base + n * stride_ks + offs)
            acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, True, qk_scale)
    elif MODE >= 5:  # runs of SUB rows, each in one page
        RUNS: tl.constexpr = BN // SUB
        runs = tl.arange(0, RUNS)
        in_run = (tl.arange(0, SUB).to(tl.int64) * stride_ks)[None, :, None] + dims[None, None, :]
        if MODE == 5:
            slots = tl.arange(0, CHUNK)
            chunk_keys = (CHUNK - 1) * page_size // BN * BN
            for chunk in range(lo, hi, chunk_keys):
                first = chunk // page_size
                pages = tl.load(Table + first + slots, mask=first + slots < max_pages, other=0)
                for n in range(chunk, tl.minimum(chunk + chunk_keys, hi), BN):
                    run_key = n + runs * SUB
                    slot = run_key // page_size
                    page = tl.gather(pages, slot - first, 0).to(tl.int64)
                    at = page * stride_kp + (run_key - slot * page_size).to(tl.int64) * stride_ks
                    k = tl.reshape(tl.load(K + at[:, None, None] + in_run), [BN, D])
                    v = tl.reshape(tl.load(V + at[:, None, None] + in_run), [BN, D])
                    acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, True, qk_scale)
        else:
            for n in range(lo, hi, BN):
                run_key = n + runs * SUB
                slot = run_key // page_size
                page = tl.load(Table + slot).to(tl.int64)
                at = page * stride_kp + (run_key - slot * page_size).to(tl.int64) * stride_ks
                k = tl.reshape(tl.load(K + at[:, None, None] + in_run), [BN, D])
                v = tl.reshape(tl.load(V + at[:, None, None] + in_run), [BN, D])
                acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, True, qk_scale)
    else:  # the shipped _paged_full_blocks' addressing, with what attn_fwd adds in some modes
        slots = tl.arange(0, CHUNK)
        keys = tl.arange(0, BN)
        row_stride = stride_ks
        if MODE == 3:
            row_stride = head_dim * HK  # a run-time row stride, as attn_fwd's (the same value)
        row_page = keys // page_size
        within = (keys % page_size).to(tl.int64) * row_stride
        if MODE == 4:  # attn_fwd's masked edge loop before (no trips at these lengths)
            for n in range(tl.maximum(hi, k_len // BN * BN), k_len, BN):
                cols = n + keys
                slot = cols // page_size
                page = tl.load(Table + slot, mask=cols < k_len, other=0).to(tl.int64)
                at = page * stride_kp + (cols - slot * page_size).to(tl.int64) * row_stride
                k = tl.load(K + at[:, None] + dims[None, :], mask=(cols < k_len)[:, None], other=0)
                v = tl.load(V + at[:, None] + dims[None, :], mask=(cols < k_len)[:, None], other=0)
                acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, True, qk_scale)
        nested = (BN % page_size == 0) | (page_size % BN == 0)
        if nested or MODE != 4:
            chunk_keys = (CHUNK - 1) * page_size // BN * BN
            for chunk in range(lo, hi, chunk_keys):
                first = chunk // page_size
                pages = tl.load(Table + first + slots, mask=first + slots < max_pages, other=0)
                if MODE == 2:
                    pages = tl.minimum(tl.maximum(pages, 0), max_pages * batch - 1)
                for n in range(chunk, tl.minimum(chunk + chunk_keys, hi), BN):
                    block_page = n // page_size
                    offset = (n - block_page * page_size).to(tl.int64)
                    page = tl.gather(pages, block_page - first + row_page, 0).to(tl.int64)
                    at = page * stride_kp + (offset * row_stride + within)
                    if MODE == 2:
                        k = tl.load(K + at[:, None] + dims[None, :], mask=dims[None, :] < head_dim, other=0)
                        v = tl.load(V + at[:, None] + dims[None, :], mask=dims[None, :] < head_dim, other=0)
                    else:
                        k = tl.load(K + at[:, None] + dims[None, :])
                        v = tl.load(V + at[:, None] + dims[None, :])
                    acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, True, qk_scale)
        else:  # attn_fwd's general loop for pages that do not nest (not taken here)
            for n in range(lo, hi, BN):
                cols = n + keys
                slot = cols // page_size
                page = tl.load(Table + slot).to(tl.int64)
                at = page * stride_kp + (cols - slot * page_size).to(tl.int64) * row_stride
                k = tl.load(K + at[:, None] + dims[None, :])
                v = tl.load(V + at[:, None] + dims[None, :])
                acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, True, qk_scale)
    seen = l_i > 0
    out = tl.where(seen[:, None], acc / tl.where(seen, l_i, 1.0)[:, None], 0.0)
    part_rows = (split * batch * HK * GROUP + b * HK * GROUP + head).to(tl.int64)
    tl.store(Part + part_rows[:, None] * D + dims[None, :], out, mask=row_ok[:, None])
    tl.store(Lse + part_rows, tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), -float("inf")), mask=row_ok)


def call(q, k, v, lengths, table, splits, part, lse, mode, config):
    bn, warps, stages, sub, chunk = config
    batch = q.shape[0]
    paged = table is not None
    paged_decode[(1, HEADS_K * splits, batch)](
        q, k, v, part, lse, lengths, table if paged else lengths, k.stride(0), k.stride(0),
        table.stride(0) if paged else 0, k.shape[1] if paged else 1, table.shape[1] if paged else 0, batch, splits,
        DIM**-0.5 * 1.4426950408889634, DIM, HK=HEADS_K, GROUP=HEADS // HEADS_K, D=DIM, BM=16, BN=bn, MODE=MODES[mode],
        SUB=sub, CHUNK=chunk, num_warps=warps, num_stages=stages,
    )  # fmt: skip


def kernel_from(path: str):
    """attn_fwd of another copy of kernels_src/attention.py (e.g. `git show REV:kernels_src/attention.py > FILE`)."""
    spec = importlib.util.spec_from_file_location(f"attention_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attn_fwd


def sass(mode: str, config: tuple) -> None:
    """The minimal kernel's loops in SASS (sm_90, this machine's Triton; no GPU): instructions per key block, as
    sass_loops.py counts attn_fwd's, with the launch's specializations (16-divisible sizes and strides)."""
    from sass_loops import loops
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from variant_registers import cuobjdump

    bn, warps, stages, sub, chunk = config
    names = list(paged_decode.arg_names)
    types = ["*bf16"] * 3 + ["*fp32"] * 2 + ["*i32"] * 2 + ["i32"] * 7 + ["fp32", "i32"]
    constexprs = dict(HK=HEADS_K, GROUP=HEADS // HEADS_K, D=DIM, BM=16, BN=bn, MODE=MODES[mode], SUB=sub, CHUNK=chunk)
    signature = {**dict(zip(names, types)), **dict.fromkeys(constexprs, "constexpr")}
    aligned = [i for i, n in enumerate(names[: len(types)]) if n not in ("batch", "num_splits", "qk_scale")]
    source = ASTSource(paged_decode, signature, constexprs, {(i,): [["tt.divisibility", 16]] for i in aligned})
    options = {"num_warps": warps, "num_stages": stages}
    binary = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm["cubin"]
    usage = cuobjdump(binary, "-res-usage")
    print(f"minimal kernel, {mode}, {'/'.join(map(str, config))}: registers {usage.split('REG:')[1].split()[0]}")
    for start, end, opcodes in loops(cuobjdump(binary, "-sass")):
        common = ", ".join(f"{name} {n}" for name, n in opcodes.most_common(8))
        print(f"  loop {start:#x}-{end:#x}: {sum(opcodes.values())} instructions ({common})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", default="")
    parser.add_argument("--configs", nargs="*", default=["64/4/3/16/256"])
    parser.add_argument("--modes", nargs="*", default=["contiguous", "rows", "rows in attn_fwd's loops"])
    parser.add_argument("--wide", action="store_true")
    parser.add_argument("--sass", action="store_true", help="print the modes' SASS loops instead (no GPU)")
    args = parser.parse_args()
    configs = [tuple(map(int, c.split("/"))) for c in args.configs]
    if args.sass:
        for mode in args.modes:
            for config in configs:
                sass(mode, config)
        return

    import torch
    from attention import decode_step, graph_ms, kvcache_tbps, paged_view
    from paged_locality import tables
    from run import warm_up_gpu
    from tune_attention import launch

    warm_up_gpu(1.0)
    kernels = {"attn_fwd": None}
    for path in filter(None, args.kernels.split(",")):
        kernels[f"attn_fwd@{Path(path).stem}"] = kernel_from(path)
    shapes = (
        ((16, 4096, 1), (16, 4096, 2), (1, 32768, 16), (1, 32768, 32)) if args.wide else ((16, 4096, 1), (1, 32768, 16))
    )
    for batch, context, splits in shapes:
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True
        ).transpose(1, 2)
        part = torch.empty(splits, batch * HEADS, DIM, device="cuda")
        lse = torch.empty(splits, batch * HEADS, device="cuda")
        layouts = {"contiguous": (kc, vc, None)}
        for page in (16, 128):
            page_bytes = page * HEADS_K * DIM * 2
            named = tables(batch, context // page, page, page_bytes)
            for name in ("ordered", "shuffled"):
                table = named[name]
                layouts[f"p{page} {name}"] = (paged_view(kc, page, table)[0], paged_view(vc, page, table)[0], table)
        cells = []
        for layout, (k, v, table) in layouts.items():
            cells.append(f"{layout}/wheel {kvcache_tbps(q, k, v, lengths, nbytes, table):.2f}")
        print(f"b{batch}x{context}: " + ", ".join(cells), flush=True)
        for config in configs:
            cells = []
            out = torch.empty_like(q)
            for layout, (k, v, table) in layouts.items():
                pages = (table, lengths) if table is not None else None
                extra = {"TABLE_CHUNK": config[4]} if pages else {}
                tile = (16, config[0], config[1], config[2])

                for name, kernel in kernels.items():
                    chosen = {"kernel": kernel} if kernel else {}

                    def shipped():
                        launch(q, k, v, out, 4, splits, DIM, False, tile, part, lse, pages, **chosen, **extra)  # noqa: B023

                    check = ""
                    if splits == 1:  # the output is final: its largest error against SDPA
                        out.fill_(float("nan"))
                        shipped()
                        check = f" ({(out.float() - ref.float()).abs().max().item():.0e})"
                    cells.append(f"{layout}/{name} {nbytes / graph_ms(shipped) / 1e9:.2f}{check}")
            for layout, (k, v, table) in layouts.items():
                for mode in args.modes:
                    if (mode == "contiguous") != (table is None) or (MODES[mode] >= 5 and config[3] > k.shape[1]):
                        continue
                    try:
                        part.fill_(float("nan"))
                        call(q, k, v, lengths, table, splits, part, lse, mode, config)
                        w = torch.softmax(lse * 0.6931471805599453, dim=0)
                        out = (w[..., None] * part).sum(0).view_as(q)
                        err = (out.float() - ref.float()).abs().max().item()
                        ms = graph_ms(lambda: call(q, k, v, lengths, table, splits, part, lse, mode, config))
                        cells.append(f"{layout}/{mode} {nbytes / ms / 1e9:.2f} ({err:.0e})")
                    except Exception as e:
                        cells.append(f"{layout}/{mode} {type(e).__name__[:12]}")
            print(f"b{batch}x{context} s{splits} {'/'.join(map(str, config))}: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
