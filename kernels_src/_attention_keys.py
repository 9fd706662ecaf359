"""Which keys query rows see, shared by attention.py's kernel (Triton) and _attention_ws.py's (Gluon calls these
too: they use only arithmetic, comparisons and broadcasting, which both front ends share)."""

import triton
import triton.language as tl


@triton.jit
def key_blocks(first_diag, last_diag, k_len, window_left, window_right, BLOCK_N: tl.constexpr):
    """For rows whose diagonals (the key each row's causal edge sits on) run from first_diag to last_diag: keys
    some row sees lie in [begin, end) with begin rounded down to a block; keys every row sees fill the whole
    blocks [u_lo, u_hi) (empty, at begin, when there are none). Windows reach window_left keys back and
    window_right forward from the diagonal."""
    lo = tl.maximum(first_diag - window_left, 0)
    end = tl.minimum(k_len, last_diag + window_right + 1)
    begin = lo // BLOCK_N * BLOCK_N
    full_lo = tl.maximum(last_diag - window_left, lo)
    full_hi = tl.minimum(end, first_diag + window_right + 1)
    f_lo = tl.cdiv(full_lo, BLOCK_N) * BLOCK_N
    f_hi = full_hi // BLOCK_N * BLOCK_N
    u_lo = tl.where(f_lo < f_hi, f_lo, begin)
    u_hi = tl.where(f_lo < f_hi, f_hi, begin)
    return begin, end, u_lo, u_hi


@triton.jit
def visible_keys(keys, diags, k_len, window_left, window_right):
    """Which (row, key) pairs of a tile the rows see, for key positions keys and each row's diagonal diags, both
    broadcast to the tile (keys along one axis, diagonals along the other, in whichever orientation the tile has):
    query i sees keys j < k_len with diag - window_left <= j <= diag + window_right (causal is window_right = 0)."""
    return (keys < k_len) & (keys >= diags - window_left) & (keys <= diags + window_right)
