"""How fast can a pool of pages be read at all, in order and shuffled? A read-only kernel (no attention) sums every
page of a decode step's keys and values (GQA 32:8 x head dim 128 bf16 rows, so a page of 16 tokens is 32 KB) through
a block table, each program reading whole pages of its run of the table, pipelined like decode's loads. If the
shuffled pool reads slower than the ordered one here too, paged decode's gap to the contiguous cache is the
memory's, not the attention kernel's. TB/s of bytes read, in CUDA graphs.

    python3 benchmarks/experiments/paged_read_ceiling.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROW = 8 * 128  # one token's key heads x head dim


@triton.jit
def read_pages(K, V, Table, Sums, pages_per_program, page_elems, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    """Program p reads table entries [p * pages_per_program, (p + 1) * pages_per_program) of keys and values,
    BLOCK elements at a time, the table's entries read CHUNK at a time ahead of the loads (as decode's chunks)."""
    p = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    slots = tl.arange(0, CHUNK)
    acc = tl.zeros([BLOCK], tl.float32)
    first = p * pages_per_program
    per_page = page_elems // BLOCK
    for c in range(0, pages_per_program, CHUNK):
        pages = tl.load(Table + first + c + slots, mask=c + slots < pages_per_program, other=0).to(tl.int64)
        for i in range(0, tl.minimum(CHUNK, pages_per_program - c) * per_page):
            page = tl.sum(tl.where(slots == i // per_page, pages, 0))
            at = page * page_elems + (i % per_page) * BLOCK
            acc += tl.load(K + at + offs).to(tl.float32) + tl.load(V + at + offs).to(tl.float32)
    tl.store(Sums + p * BLOCK + offs, acc)


def main() -> None:
    from attention import graph_ms
    from run import copy_bandwidth, warm_up_gpu

    warm_up_gpu(1.0)
    print(f"copy bandwidth {copy_bandwidth():.2f} TB/s", flush=True)
    for tokens in (16 * 4096, 64 * 8192, 32768):
        k, v = (torch.randn(tokens * ROW, device="cuda").to(torch.bfloat16) for _ in range(2))
        nbytes = 2 * k.numel() * k.element_size()
        for page in (16, 128):
            n_pages = tokens // page
            orders = {"ordered": torch.arange(n_pages, device="cuda"),
                      "shuffled": torch.randperm(n_pages, device="cuda")}  # fmt: skip
            for programs in (128, 256, 528):
                if n_pages % programs:
                    programs = n_pages // max(1, n_pages // programs)
                per = n_pages // programs
                sums = torch.empty(programs, 8192, device="cuda")
                cells = []
                for name, order in orders.items():
                    table = order.to(torch.int32)[: programs * per].contiguous()
                    for block, stages in ((4096, 3), (8192, 3), (4096, 5)):

                        def call():
                            read_pages[(programs,)](k, v, table, sums, per, page * ROW, CHUNK=64, BLOCK=block,
                                                    num_warps=4, num_stages=stages)  # fmt: skip

                        try:
                            ms = graph_ms(call)
                            cells.append(f"{name} {block}/{stages} {nbytes * programs * per / n_pages / ms / 1e9:.2f}")
                        except Exception as e:  # shared memory
                            cells.append(f"{name} {block}/{stages} {type(e).__name__[:10]}")
                print(f"{tokens} tokens, pages of {page}, {programs} programs: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
