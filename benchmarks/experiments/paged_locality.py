"""Is paged decode's gap to the contiguous cache a matter of where the pages lie? The installed wheel's decode
(automatic splits, CUDA graphs) on attention.py's decode shapes with the same keys and values as a contiguous cache
and as pools of pages of 16 and 128 under several block tables: in order (each sequence's pages consecutive, as the
contiguous cache), shuffled within runs of 2 MB of pool (a few TLB pages per sequence's stretch; --windows adds
other run sizes), shuffled across the whole pool (attention.py's table) and in order with the sequences interleaved
page by page. --sorted-keys adds shuffled tables whose entries are sorted within each run of that many keys of a
sequence: what a kernel that read each slice's pages in the order they lie in the pool would see. TB/s of KV read.
--shapes picks attention.py's decode shapes by index.

    python3 benchmarks/experiments/paged_locality.py [--windows 256K 2M 16M] [--sorted-keys 2048 4096] [--shapes 1 2]
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import DECODE_SHAPES, decode_step, kvcache_tbps, paged_view  # noqa: E402
from run import warm_up_gpu  # noqa: E402


def tables(batch: int, per: int, page: int, page_bytes: int, windows: tuple = ("2M",), sorted_keys: tuple = ()) -> dict:
    """Block tables (batch, per) over a pool of batch * per pages of `page` keys."""
    named = {"ordered": torch.arange(batch * per, device="cuda").view(batch, per)}
    for window in windows:
        run = max(1, int(window[:-1]) * {"K": 2**10, "M": 2**20}[window[-1]] // page_bytes)  # pages per window
        named[f"local {window}"] = torch.cat([start + torch.randperm(min(run, batch * per - start), device="cuda")
                                              for start in range(0, batch * per, run)]).view(batch, per)  # fmt: skip
    named["shuffled"] = torch.randperm(batch * per, device="cuda").view(batch, per)
    for keys in sorted_keys:
        run = max(1, min(per, keys // page))
        if per % run == 0:
            runs = named["shuffled"].reshape(batch, per // run, run)
            named[f"sorted in {keys} keys"] = runs.sort(dim=2).values.reshape(batch, per)
    named["interleaved"] = torch.arange(batch * per, device="cuda").view(per, batch).T
    return {name: t.to(torch.int32).contiguous() for name, t in named.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--windows", nargs="*", default=["2M"])
    parser.add_argument("--sorted-keys", nargs="*", type=int, default=[])
    parser.add_argument("--shapes", nargs="*", type=int, default=list(range(len(DECODE_SHAPES))))
    args = parser.parse_args()
    warm_up_gpu(1.0)
    for batch, context in (DECODE_SHAPES[i] for i in args.shapes):
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        cells = [f"contiguous {kvcache_tbps(q, kc, vc, lengths, nbytes):.2f}"]
        for page in (16, 128):
            page_bytes = page * kc.shape[2] * kc.shape[3] * kc.element_size()
            for name, table in tables(batch, context // page, page, page_bytes, args.windows, args.sorted_keys).items():
                pools = paged_view(kc, page, table)[0], paged_view(vc, page, table)[0]
                cells.append(f"p{page} {name} {kvcache_tbps(q, *pools, lengths, nbytes, table):.2f}")
        print(f"b{batch}x{context}: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
