"""The polynomial behind kernels_src/activation.py's gelu: log2(Phi(-u)) for u in [0, 5.65], degree 10, fitted for
the smallest maximum error (Lawson's reweighted least squares), then gelu evaluated as the kernel does (float32
Horner, exp2) against a float64 reference on a dense grid and on normal samples. Prints the coefficients, highest
power first, and the errors beside those of the textbook float32 form 0.5 x (1 + erf(x / sqrt 2)). CPU only.

    python3 benchmarks/experiments/gelu_fit.py
"""

import math

import numpy as np

TAIL = 5.65  # Phi(-5.65) = 8e-9: below it the kernel takes Phi as 0
DEGREE = 10


def fit() -> np.ndarray:
    u = np.linspace(0.0, TAIL, 40001)
    target = np.array([math.log2(0.5 * math.erfc(v / math.sqrt(2.0))) for v in u])
    basis = np.vander(u / TAIL, DEGREE + 1, increasing=True)
    weights = np.ones_like(u)
    for _ in range(100):
        root = np.sqrt(weights)
        coef, *_ = np.linalg.lstsq(basis * root[:, None], target * root, rcond=None)
        error = np.abs(basis @ coef - target)
        weights *= error
        weights /= weights.sum()
    print(f"fit: max error {error.max():.3g} in log2(Phi)")
    return (coef / TAIL ** np.arange(DEGREE + 1))[::-1].astype(np.float32)  # highest power first


def gelu32(x: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """The kernel's arithmetic in float32."""
    x = x.astype(np.float32)
    u = np.minimum(np.abs(x), np.float32(TAIL))
    log2_p = np.full_like(u, coef[0])
    for c in coef[1:]:
        log2_p = (log2_p * u + c).astype(np.float32)
    p = np.where(np.abs(x) > TAIL, np.float32(0.0), np.exp2(log2_p).astype(np.float32))
    return x * np.where(x < 0, p, np.float32(1.0) - p)


def main() -> None:
    coef = fit()
    print("coefficients:", ", ".join(repr(float(c)) for c in coef))
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-12, 12, 2_000_001), 3 * rng.standard_normal(1_000_000)]).astype(np.float32)
    ref = np.array([float(v) * 0.5 * math.erfc(-float(v) / math.sqrt(2.0)) for v in x])
    erf32 = np.array([math.erf(float(v) / math.sqrt(2.0)) for v in x], dtype=np.float32)
    forms = {"kernel": gelu32(x, coef), "textbook float32": np.float32(0.5) * x * (np.float32(1.0) + erf32)}
    tail = x > -5.5
    for name, y in forms.items():
        err = np.abs(y.astype(np.float64) - ref)
        floor = (err / np.maximum(np.abs(ref), 1.0)).max()
        relative = (err[tail] / np.maximum(np.abs(ref[tail]), 1e-30)).max()
        print(f"{name}: max error / max(|gelu|, 1) {floor:.3g}; max relative error for x > -5.5 {relative:.3g}")


if __name__ == "__main__":
    main()
