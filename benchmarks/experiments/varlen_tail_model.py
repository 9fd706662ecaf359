"""A list-scheduling model of packed prefill on the H100 (no GPU needed): the programs of attn_fwd_ws (128 query
rows of one head of one sequence, costing a fixed `a` us plus 0.0131 us per key, head dim 128) handed in index
order to 132 multiprocessors, one at a time each, for benchmarks/attention.py's twelve sequences in their batch
order, sorted longest first and shortest first; empty programs cost 0.3 us. Prints the model's makespan in us
against the ideal (total work / 132). It is what the stop-24 trial of starting the longest sequences first rested
on (h100-2026-11-24-experiments.md); the measurement did not bear it out.

    python3 benchmarks/experiments/varlen_tail_model.py
"""

import heapq
import json
import math
from pathlib import Path

SMS, BLOCK_M, HEADS, PER_KEY_US, EMPTY_US = 132, 128, 16, 0.0131, 0.3
RESULTS = Path(__file__).resolve().parents[1] / "results" / "h100-2026-11-24-attention-family.json"


def makespan(costs: list[float]) -> float:
    free = [0.0] * SMS
    for cost in costs:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free)


def programs(lengths: list[int], order, fixed_us: float, causal: bool) -> list[float]:
    """Each program's cost in grid order: sequence-major, then head, then query tiles last first (as the kernel)."""
    tiles = max(math.ceil(n / BLOCK_M) for n in lengths)
    costs = []
    for b in order:
        n = lengths[b]
        for _ in range(HEADS):
            for t in reversed(range(tiles)):
                if t * BLOCK_M >= n:
                    costs.append(EMPTY_US)
                else:
                    keys = min(n, (t + 1) * BLOCK_M) if causal else n
                    costs.append(fixed_us + PER_KEY_US * keys)
    return costs


def main() -> None:
    lengths = json.loads(RESULTS.read_text())["varlen"][0]["lengths"]
    print("lengths", lengths)
    for fixed_us in (5, 8):
        for causal in (False, True):
            batch = programs(lengths, range(len(lengths)), fixed_us, causal)
            longest = programs(lengths, sorted(range(len(lengths)), key=lambda b: -lengths[b]), fixed_us, causal)
            shortest = programs(lengths, sorted(range(len(lengths)), key=lambda b: lengths[b]), fixed_us, causal)
            ideal = sum(c for c in batch if c > EMPTY_US) / SMS
            print(f"fixed {fixed_us} us, causal={causal}: batch order {makespan(batch):.0f}, longest first "
                  f"{makespan(longest):.0f}, shortest first {makespan(shortest):.0f}, ideal {ideal:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
