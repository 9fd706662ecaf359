"""Shared fixtures: fresh random data every run (seed printed on failure) and the GPU marker's skip."""

from __future__ import annotations

import os
import secrets

import numpy as np
import pytest


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and torch with CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    """A generator seeded fresh for each test; the seed is reported if the test fails."""
    seed = int(os.environ.get("XOPSAOT_TEST_SEED") or secrets.randbits(32))
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


@pytest.fixture
def poison(monkeypatch):
    """Every tensor torch.empty / torch.empty_like returns during a test starts as NaN (or -1 for integers), so an
    element a kernel does not write fails the comparison."""
    torch = pytest.importorskip("torch")
    for name in ("empty", "empty_like"):
        original = getattr(torch, name)

        def poisoned(*args, original=original, **kwargs):
            out = original(*args, **kwargs)
            return out.fill_(float("nan") if out.is_floating_point() else -1)

        monkeypatch.setattr(torch, name, poisoned)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        seeds = [v for k, v in item.user_properties if k == "seed"]
        if seeds:
            report.sections.append(("random seed", f"XOPSAOT_TEST_SEED={seeds[0]}"))
