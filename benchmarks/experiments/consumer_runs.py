"""Whether a Hopper prefill consumer's run of key blocks ends at the same block by the one formula kept in stop 26's
review (n_trail + n_full + (p_lo - w_begin) / BLOCK_N) as by the select it replaced, which took
n_trail - (w_begin - p_hi) / BLOCK_N when w_begin >= p_hi. Plain integers mirror kernels_src/_attention_keys.py's
key_blocks and _attention_ws.py's _consumer (Triton's integer // truncates toward zero); no GPU.

    python benchmarks/experiments/consumer_runs.py
"""

import itertools

BIG = 1 << 30  # an unlimited window side, as the launcher passes it
BLOCK_N = 128


def tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def cdiv(a: int, b: int) -> int:
    return tdiv(a + b - 1, b)


def key_blocks(first_diag, last_diag, k_len, left, right):
    lo = max(first_diag - left, 0)
    end = min(k_len, last_diag + right + 1)
    begin = tdiv(lo, BLOCK_N) * BLOCK_N
    f_lo = cdiv(max(last_diag - left, lo), BLOCK_N) * BLOCK_N
    f_hi = tdiv(min(end, first_diag + right + 1), BLOCK_N) * BLOCK_N
    return (begin, end, f_lo, f_hi) if f_lo < f_hi else (begin, end, begin, begin)


def main() -> None:
    checked = differ = 0
    windows = ((BIG, BIG), (BIG, 0), (0, 0), (30, 0), (5, 40), (150, 20), (300, 300), (BIG, 100), (0, BIG))
    for block_m, q_len, k_len in itertools.product((128, 192), (1, 17, 129, 300, 700), (1, 77, 300, 700, 1500)):
        shift = k_len - q_len
        for (left, right), start_m in itertools.product(windows, range(0, q_len, block_m)):
            last_row = min(start_m + block_m - 1, q_len - 1)
            begin, end, p_lo, p_hi = key_blocks(start_m + shift, last_row + shift, k_len, left, right)
            n_trail, n_full = cdiv(max(end - p_hi, 0), BLOCK_N), tdiv(p_hi - p_lo, BLOCK_N)
            n_total = n_trail + n_full + tdiv(p_lo - begin, BLOCK_N)
            for row0 in range(start_m, min(start_m + block_m, q_len), 64):
                w_begin, w_end, _, _ = key_blocks(row0 + shift, min(row0 + 63, q_len - 1) + shift, k_len, left, right)
                first = n_trail - min(max(cdiv(w_end - p_hi, BLOCK_N), 0), n_trail)
                kept = n_trail + n_full + tdiv(p_lo - w_begin, BLOCK_N)
                replaced = n_trail - tdiv(w_begin - p_hi, BLOCK_N) if w_begin >= p_hi else kept
                checked += 1
                differ += min(max(kept, first), n_total) != min(max(replaced, first), n_total)
    print(f"{checked} consumers checked, {differ} differ")


if __name__ == "__main__":
    main()
