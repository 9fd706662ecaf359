"""sample and linear_sample on the CPU path and the GPU: the distributions of top_k / top_p / temperature against
float64 probabilities computed here (chi-square), the filters' sets, greedy rows, the GPU's tokens against Gumbel
scores the test forms itself from the Philox draws, equal tokens for equal seeds on both paths, per-row parameter
arrays, a 128k vocabulary, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from arrays import host64 as host
from arrays import on_path as arr
from arrays import torch_or_skip, unexercised

import xopsaot
from xopsaot import _library
from xopsaot._philox import draws

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
FLOATS = ["float16", "bfloat16", "float32"]
GPU_USED: set[int] = set()


def ran(where):
    if where == "gpu":  # every kernel the last call launched (a reduction, the LM head's chunks)
        GPU_USED.update(_library.recent_variants())


def on(where, array):
    return array if where == "cpu" else torch_or_skip().from_numpy(np.ascontiguousarray(array)).cuda()


def typed(where, array, dtype):
    """float32 values as an array of `dtype` on the path's device."""
    array = np.ascontiguousarray(array, dtype=np.float32)
    if where == "gpu":
        torch = torch_or_skip()
        return torch.from_numpy(array).to(getattr(torch, dtype)).cuda()
    if dtype == "bfloat16":
        return array.astype(pytest.importorskip("ml_dtypes").bfloat16)
    return array.astype(dtype)


def tokens(out) -> np.ndarray:
    return host(out).astype(np.int64)


def gumbel_noise(n: int, seed: int, offset: int, rows: int) -> np.ndarray:
    """The Gumbel noise (rows, n) of rows 0..rows-1 in float64, formed here from the Philox draws as the kernel's
    docstring says: u = (top 23 bits + 0.5) / 2^23."""
    u = ((draws(n, seed, offset, stream=np.arange(rows)) >> np.uint32(9)).astype(np.float64) + 0.5) * 2.0**-23
    return -np.log(-np.log(u))


def assert_gumbel_argmax(token: int, x: np.ndarray, p: np.ndarray, temperature: float, gumbel: np.ndarray, what: str):
    """token is the argmax of x / temperature + gumbel over the kept tokens (p > 0), to float32 rounding."""
    score = np.where(p > 0, x.astype(np.float64) / temperature + gumbel, -np.inf)
    assert score[token] >= score.max() - 1e-4 * max(1.0, abs(score.max())), f"{what}: not the Gumbel argmax"


def kept_probabilities(x: np.ndarray, temperature: float, top_k=None, top_p=None) -> np.ndarray:
    """The distribution a row should be sampled from, in float64: softmax(x / T) over the tokens top_k and then
    top_p keep (ties at a threshold kept), renormalized."""
    x = x.astype(np.float64)
    kept = np.ones(x.shape, bool)
    if top_k:
        kept &= x >= np.sort(x)[::-1][top_k - 1]
    p = np.where(kept, np.exp((x - x.max()) / temperature), 0.0)
    p /= p.sum()
    if top_p is not None and top_p < 1:
        order = np.argsort(-x, kind="stable")
        cumulative = np.cumsum(p[order])
        for i, j in enumerate(order):  # the first value whose run reaches top_p
            last_of_run = i + 1 == len(order) or x[order[i + 1]] != x[j]
            if last_of_run and cumulative[i] >= top_p:
                kept &= x >= x[j]
                break
        p = np.where(kept, p, 0.0)
        p /= p.sum()
    return p


def chi_square_bound(df: int, z: float = 4.26) -> float:
    """The chi-square quantile for a tail of about 1e-5 (Wilson-Hilferty)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def assert_distribution(samples: np.ndarray, p: np.ndarray, what: str) -> None:
    counts = np.bincount(samples, minlength=len(p))
    assert counts[p == 0].sum() == 0, f"{what}: tokens the filters drop were drawn: {np.nonzero(counts * (p == 0))}"
    expected = p[p > 0] * len(samples)
    statistic = (((counts[p > 0] - expected) ** 2) / expected).sum()
    df = max(int((p > 0).sum()) - 1, 1)
    assert statistic <= chi_square_bound(df), f"{what}: chi-square {statistic:.1f} > {chi_square_bound(df):.1f}"


SETTINGS = [  # temperature, top_k, top_p
    (1.0, None, None),
    (0.5, None, None),
    (2.0, 3, None),
    (1.0, None, 0.7),
    (0.8, 4, 0.6),
]


@pytest.mark.parametrize("where", PATHS)
def test_sample_distributions(request, rng, where):
    """20000 rows of the same 8 logits (a tie among them) are 20000 independent draws."""
    if where == "gpu":
        request.getfixturevalue("poison")
    x = np.array([1.0, 2.5, 0.3, 2.5, -1.0, 1.7, 0.0, 2.0], np.float32)
    rows = 20000
    for dtype in FLOATS:
        logits = typed(where, np.tile(x, (rows, 1)), dtype)
        rounded = host(logits)[0]
        for temperature, top_k, top_p in SETTINGS:
            seed = int(rng.integers(2**62))
            out = xopsaot.sample(logits, temperature, top_k, top_p, seed=seed)
            ran(where)
            assert out.shape == (rows,)
            assert str(out.dtype).replace("torch.", "") == "int64"
            p = kept_probabilities(rounded, temperature, top_k, top_p)
            assert_distribution(tokens(out), p, f"{where} {dtype} T={temperature} k={top_k} p={top_p}")


@pytest.mark.parametrize("where", PATHS)
def test_sample_rows(request, rng, where):
    """Random rows: greedy rows take the argmax, filtered rows stay in their sets, and the tokens are the argmax of
    the Gumbel scores formed here from the Philox draws (to rounding); per-row parameter arrays."""
    if where == "gpu":
        request.getfixturevalue("poison")
    rows, n = 64, 1000
    x = (rng.standard_normal((rows, n)) * 2).astype(np.float32)
    x[0, [5, 9]] = 20.0  # a tie at the top: greedy takes the first
    temperature = np.where(np.arange(rows) % 4 == 0, 0.0, rng.uniform(0.3, 1.5, rows)).astype(np.float32)
    top_k = rng.integers(0, 50, rows).astype(np.int32)
    top_p = rng.uniform(0.2, 1.0, rows).astype(np.float32)
    seed, offset = int(rng.integers(2**62)), int(rng.integers(1000))
    out = tokens(
        xopsaot.sample(
            on(where, x), on(where, temperature), on(where, top_k), on(where, top_p), seed=seed, offset=offset
        )
    )
    ran(where)
    gumbel = gumbel_noise(n, seed, offset, rows)
    for r in range(rows):
        if temperature[r] == 0:
            assert out[r] == np.argmax(x[r]), f"row {r}: greedy"
            continue
        p = kept_probabilities(x[r], float(temperature[r]), int(top_k[r]) or None, float(top_p[r]))
        assert p[out[r]] > 0, f"row {r}: token {out[r]} is outside the kept set"
        assert_gumbel_argmax(out[r], x[r], p, float(temperature[r]), gumbel[r], f"row {r}")
    assert out[0] == 5


@pytest.mark.parametrize("where", PATHS)
def test_sample_top_draw_gives_finite_noise(where):
    """A token whose draw is the largest (top 24 bits all ones: seed 1, counter 6318945, output 1) gets finite
    Gumbel noise: at logit -30 among 999 zeros it is never sampled. (u rounded to 1.0 in float32 once, and the token
    won with noise +inf.)"""
    seed, offset = 1, 6318945
    assert draws(4, seed, offset)[1] >> 8 == 0xFFFFFF
    x = np.zeros((2, 1000), np.float32)
    x[:, 1] = -30.0
    for dtype in FLOATS:
        out = tokens(xopsaot.sample(typed(where, x, dtype), 1.0, seed=seed, offset=offset))
        ran(where)
        assert out[0] != 1, f"{where} {dtype}: the token of the largest draw was sampled at logit -30"


@pytest.mark.parametrize("where", PATHS)
def test_sample_seeds(rng, where):
    x = on(where, rng.standard_normal((50, 300)).astype(np.float32))
    first = tokens(xopsaot.sample(x, 1.0, seed=7))
    assert np.array_equal(first, tokens(xopsaot.sample(x, 1.0, seed=7)))
    assert not np.array_equal(first, tokens(xopsaot.sample(x, 1.0, seed=7, offset=1000)))
    assert not np.array_equal(first, tokens(xopsaot.sample(x, 1.0, seed=8)))
    one = tokens(xopsaot.sample(on(where, rng.standard_normal(17).astype(np.float32)), 0.7, seed=1))
    assert one.shape == () and 0 <= int(one) < 17
    lead = xopsaot.sample(on(where, rng.standard_normal((2, 3, 33)).astype(np.float32)), 1.0, 5, 0.9, seed=3)
    assert tokens(lead).shape == (2, 3)


def nan_rows(rng, n: int) -> np.ndarray:
    """Rows of logits with NaN: one, at the row's max, 1% of them, all but the last 5, all."""
    x = (rng.standard_normal((5, n)) * 3).astype(np.float32)
    x[0, n // 3] = np.nan
    x[1, np.argmax(x[1])] = np.nan
    x[2, rng.random(n) < 0.01] = np.nan
    x[3, : n - 5] = np.nan
    x[4] = np.nan
    return x


@pytest.mark.parametrize("where", PATHS)
def test_sample_reads_nan_as_minus_infinity(rng, where):
    """A NaN logit is drawn by no path and counted by no filter: every setting gives the tokens it gives with -inf in
    its place, never a NaN's token (a row of NaN gives 0, as a row of -inf does). On the GPU at 32000 and 128256
    tokens, one row at a time (split rows or clusters on Hopper) and among enough rows to take sample_kernel. (The
    kernels counted NaN above every top_k threshold; the NumPy path drew NaN's tokens or failed on a NaN max.)"""
    sizes = (1000, 32000) if where == "cpu" else (32000, 128_256)
    batch = 1 if where == "cpu" else torch_or_skip().cuda.get_device_properties(0).multi_processor_count
    settings = [(0.7, None, None), (0.7, 50, None), (0.7, None, 0.9), (0.7, 50, 0.9), (0.0, None, None)]
    for n in sizes:
        x = nan_rows(rng, n)
        masked = np.where(np.isnan(x), -np.inf, x).astype(np.float32)
        filler = rng.standard_normal((batch, n)).astype(np.float32)
        for dtype in FLOATS:
            for temperature, top_k, top_p in settings:
                what = f"{where} {n} {dtype} {temperature} {top_k} {top_p}"
                seed = int(rng.integers(2**62))
                for r in range(len(x)):
                    got = tokens(xopsaot.sample(typed(where, x[r], dtype), temperature, top_k, top_p, seed=seed))
                    ran(where)
                    want = tokens(xopsaot.sample(typed(where, masked[r], dtype), temperature, top_k, top_p, seed=seed))
                    assert got == want, f"{what} row {r} alone: {got}, {want} with -inf"
                    assert not np.isnan(x[r, got]) or (r == 4 and got == 0), f"{what} row {r}: NaN's token {got}"
                both = [np.concatenate([rows, filler]) for rows in (x, masked)]
                got, want = (
                    tokens(xopsaot.sample(typed(where, b, dtype), temperature, top_k, top_p, seed=seed)) for b in both
                )
                ran(where)
                assert np.array_equal(got[:5], want[:5]), f"{what} among {batch}: {got[:5]}, {want[:5]} with -inf"


@pytest.mark.gpu
def test_sample_paths_agree(rng):
    """The same seed gives the same tokens on the GPU and on the CPU path (bar near-ties of the float32 scores)."""
    for dtype in FLOATS:
        x = typed("gpu", rng.standard_normal((200, 4096)), dtype)
        for temperature, top_k, top_p in SETTINGS:
            gpu = tokens(xopsaot.sample(x, temperature, top_k, top_p, seed=11))
            ran("gpu")
            cpu = tokens(xopsaot.sample(x.cpu(), temperature, top_k, top_p, seed=11))
            assert (gpu == cpu).mean() >= 0.99, f"{dtype} {temperature} {top_k} {top_p}: {(gpu != cpu).sum()} differ"


@pytest.mark.gpu
def test_sample_large_vocabulary(rng):
    """128256 logits per row (and an odd 100003, the unhinted variant), several of the kernel's steps of 16384 and a
    tail: top_k and top_p sets hold, and each token is the Gumbel argmax the test forms from the Philox draws."""
    gumbel = gumbel_noise(128_256, 5, 0, 8)
    for n, dtype in ((128_256, "bfloat16"), (128_256, "float32"), (100_003, "float16")):
        logits = typed("gpu", rng.standard_normal((8, n)) * 3, dtype)
        x = host(logits)
        for top_k, top_p in ((20, None), (None, 0.5), (1000, 0.9), (1, None), (None, None)):
            out = tokens(xopsaot.sample(logits, 0.9, top_k, top_p, seed=5))
            ran("gpu")
            for r in range(8):
                p = kept_probabilities(x[r], 0.9, top_k, top_p)
                what = f"{n} k={top_k} p={top_p} row {r}: token {out[r]}"
                assert p[out[r]] > 0, f"{what} outside the kept set"
                assert_gumbel_argmax(out[r], x[r], p, 0.9, gumbel[r, :n], what)


@pytest.mark.gpu
def test_sample_unfiltered_rows_split(request, rng):
    """Rows no filter touches, fewer than the multiprocessors, run split in chunks of 4096-token steps
    (sample_chunks_kernel, then sample_pick_kernel): the same tokens as the same rows among enough others to take
    sample_kernel whole (the Philox stream is the row's index), and each the Gumbel argmax formed here. Greedy rows
    (per-row temperature 0) whose top value is tied across chunks take the first; a row of -inf takes token 0; rows
    of one step past a chunk edge (4097, 8193), an odd 100003 and whole steps (12288, 128256)."""
    request.getfixturevalue("poison")
    torch = torch_or_skip()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cases = ((4097, "float32"), (8193, "bfloat16"), (100_003, "float16"), (12288, "float16"), (128_256, "float32"))
    for n, dtype in cases:
        rows = 5
        x = (rng.standard_normal((rows, n)) * 3).astype(np.float32)
        x[1, [100, n - 1]] = 50.0  # greedy: the tie's first, chunks apart
        x[2, :] = -np.inf  # nothing beats -inf: token 0
        x[3, : n - 3] = -np.inf  # only the last step's tail
        temperature = np.array([0.8, 0.0, 1.0, 1.3, 0.0], np.float32)
        seed, offset = int(rng.integers(2**62)), int(rng.integers(1000))
        logits = typed("gpu", x, dtype)
        split = tokens(xopsaot.sample(logits, on("gpu", temperature), seed=seed, offset=offset))
        used = set(_library.recent_variants(2))
        GPU_USED.update(used)
        kernels = {v["kernel"] for v in _library.manifest()["variants"] if v["index"] in used}
        assert kernels == {"sample_chunks_kernel", "sample_pick_kernel"}, f"{n}: {kernels}"
        filler = typed("gpu", rng.standard_normal((sms, n)), dtype)
        whole = tokens(
            xopsaot.sample(
                torch.cat([logits, filler]),
                on("gpu", np.concatenate([temperature, np.ones(sms, np.float32)])),
                seed=seed,
                offset=offset,
            )
        )[:rows]
        ran("gpu")
        assert np.array_equal(split, whole), f"{n} {dtype}: split {split} against whole {whole}"
        assert split[1] == 100 and split[2] == 0 and split[3] >= n - 3 and split[4] == np.argmax(host(logits)[4])
        gumbel = gumbel_noise(n, seed, offset, rows)
        rounded = host(logits)
        for r in (0, 3):
            kept = np.isfinite(rounded[r]).astype(float)
            assert_gumbel_argmax(split[r], rounded[r], kept, float(temperature[r]), gumbel[r], f"{n} row {r}")


@pytest.mark.gpu
def test_sample_filtered_rows_in_clusters(request, rng):
    """On Hopper, few filtered rows of 16385 to 131072 tokens run in thread-block clusters of 8 programs a row
    (sample_cluster_kernel): each token is in the float64 kept set and the Gumbel argmax formed here; rows without
    top_p get the same tokens as the same rows among enough others to take sample_kernel (their top_k counts are
    exact). Per-row parameters; a greedy row; a row of -inf but the last share's tail; a top tie shares apart that
    top_k 1 keeps whole; 16400 tokens (shares of 2064, the last one short), 32000, 128256 and 131072 (full shares)."""
    request.getfixturevalue("poison")
    torch = torch_or_skip()
    if torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("sample_cluster_kernel is compiled for sm_90 only")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    temperature = np.array([0.8, 1.0, 0.7, 0.0, 1.2, 1.0, 0.9], np.float32)
    top_k = np.array([50, 0, 1000, 7, 1, 0, 1], np.int32)
    top_p = np.array([1.0, 0.9, 0.5, 0.3, 1.0, 0.9, 1.0], np.float32)
    for n, dtype in ((16400, "float16"), (32000, "bfloat16"), (128_256, "float32"), (131_072, "bfloat16")):
        rows = len(temperature)
        x = (rng.standard_normal((rows, n)) * 3).astype(np.float32)
        x[5, : n - 3] = -np.inf
        x[6, [10, n - 1]] = 50.0
        seed, offset = int(rng.integers(2**62)), int(rng.integers(1000))
        logits = typed("gpu", x, dtype)
        parameters = (on("gpu", temperature), on("gpu", top_k), on("gpu", top_p))
        split = tokens(xopsaot.sample(logits, *parameters, seed=seed, offset=offset))
        used = set(_library.recent_variants(1))
        GPU_USED.update(used)
        kernels = {v["kernel"] for v in _library.manifest()["variants"] if v["index"] in used}
        assert kernels == {"sample_cluster_kernel"}, f"{n}: {kernels}"
        filler = typed("gpu", rng.standard_normal((sms, n)), dtype)
        whole = tokens(
            xopsaot.sample(
                torch.cat([logits, filler]),
                *(torch.cat([v, v[:1].repeat(sms)]) for v in parameters),
                seed=seed,
                offset=offset,
            )
        )[:rows]
        ran("gpu")
        rounded = host(logits)
        gumbel = gumbel_noise(n, seed, offset, rows)
        for r in range(rows):
            what = f"{n} {dtype} row {r}: token {split[r]}"
            if temperature[r] == 0:
                assert split[r] == np.argmax(rounded[r]) == whole[r], what
                continue
            p = kept_probabilities(rounded[r], float(temperature[r]), int(top_k[r]) or None, float(top_p[r]))
            assert p[split[r]] > 0, f"{what} outside the kept set"
            assert_gumbel_argmax(split[r], rounded[r], p, float(temperature[r]), gumbel[r], what)
            if top_p[r] >= 1:
                assert split[r] == whole[r], f"{what}, {whole[r]} whole"
        assert split[5] >= n - 3 and split[6] in (10, n - 1)


@pytest.mark.gpu
def test_sample_replays(rng):
    """The fast path replays sample calls of scalars: a fixed seed, greedy (which draws nothing, so seed=None takes
    seed 0), and seed=None, each replay of which draws its own seed; a replay gives what the full path gives for the
    same data and seed. Calls that copy per-row arrays to the host to check them are not recorded."""
    from xopsaot import _plans

    torch = torch_or_skip()
    _plans.clear()
    try:
        first, second = (typed("gpu", rng.standard_normal((3, 5000)), "bfloat16") for _ in range(2))
        xopsaot.sample(first, 0.7, seed=3)
        xopsaot.sample(first, 0.0)
        assert len(_plans.plans) == 2
        replayed = tokens(xopsaot.sample(second, 0.7, seed=3))
        greedy = tokens(xopsaot.sample(second, 0.0))
        assert len(_plans.plans) == 2
        _plans.clear()
        assert np.array_equal(replayed, tokens(xopsaot.sample(second, 0.7, seed=3)))
        assert np.array_equal(greedy, np.argmax(host(second), axis=1))
        _plans.clear()
        # equal logits: every token as likely, so four draws of 64 rows that repeat each other would be a repeated seed
        flat = typed("gpu", np.zeros((64, 5000)), "bfloat16")
        draws = [tokens(xopsaot.sample(flat, 1.0)) for _ in range(4)]
        assert len(_plans.plans) == 1
        assert all(((d >= 0) & (d < 5000)).all() for d in draws)
        assert len({d.tobytes() for d in draws}) == 4
        _plans.clear()
        xopsaot.sample(first, torch.full((3,), 0.7, device="cuda"), seed=3)  # per-row values checked on the host
        assert len(_plans.plans) == 0
    finally:
        _plans.clear()


@pytest.mark.parametrize("where", PATHS)
def test_linear_sample(request, rng, where):
    """Equal to sample() of the logits linear() computes (rounded to the dtype), seed for seed."""
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        x = arr(rng, (3, 5, 64), dtype, where)
        w = arr(rng, (1000, 64), dtype, where, scale=0.5)
        b = arr(rng, (1000,), dtype, where)
        for bias in (None, b):
            out = xopsaot.linear_sample(x, w, bias, 0.8, 50, 0.9, seed=21)
            ran(where)
            logits = xopsaot.linear(x, w, bias)
            assert np.array_equal(tokens(out), tokens(xopsaot.sample(logits, 0.8, 50, 0.9, seed=21))), dtype


@pytest.mark.parametrize("where", PATHS)
def test_sample_bad_input(rng, where):
    x = on(where, rng.standard_normal((4, 10)).astype(np.float32))
    with pytest.raises(ValueError, match=r"sample: top_p is 0.0; it must be in \(0, 1\]"):
        xopsaot.sample(x, 1.0, top_p=0.0)
    with pytest.raises(ValueError, match=r"sample: top_p is 1.5"):
        xopsaot.sample(x, 1.0, top_p=1.5)
    with pytest.raises(ValueError, match=r"sample: temperature is -1.0; it must be finite and >= 0"):
        xopsaot.sample(x, -1.0)
    with pytest.raises(ValueError, match=r"sample: top_k must be >= 0, got -1"):
        xopsaot.sample(x, 1.0, top_k=-1)
    with pytest.raises(ValueError, match=r"sample: top_k as an array must have one value per row, shape \(4,\)"):
        xopsaot.sample(x, 1.0, top_k=on(where, np.ones(3, np.int32)))
    with pytest.raises(ValueError, match=r"sample: top_p holds values outside \(0, 1\]"):
        xopsaot.sample(x, 1.0, top_p=on(where, np.array([0.5, 0.0, 1.0, 1.0], np.float32)))
    with pytest.raises(TypeError, match=r"sample: logits.dtype is int32"):
        xopsaot.sample(on(where, np.ones((2, 3), np.int32)))
    with pytest.raises(ValueError, match=r"sample: seed must be below 2\*\*63"):
        xopsaot.sample(x, seed=2**63)
    with pytest.raises(ValueError, match=r"linear_sample: weight has shape \(10, 6\) but the input has 10"):
        xopsaot.linear_sample(x, on(where, np.ones((10, 6), np.float32)))
    with pytest.raises(ValueError, match=r"linear_sample: bias must have shape \(10,\), got \(9,\)"):
        xopsaot.linear_sample(x, on(where, np.ones((10, 10), np.float32)), on(where, np.ones(9, np.float32)))
    with pytest.raises(ValueError, match=r"linear_sample: weight has 0 rows \(an empty vocabulary\)"):
        xopsaot.linear_sample(x, on(where, np.ones((0, 10), np.float32)))


@pytest.mark.gpu
def test_every_sample_variant_was_checked():
    kernels = {"sample_kernel", "sample_cluster_kernel", "sample_chunks_kernel", "sample_pick_kernel"}
    missing = unexercised(kernels, GPU_USED)
    assert not missing, f"sample variants never exercised: {missing}"
