"""diagnose's trend statistics in numpy (diagnose/stats.py: Theil-Sen and Kendall's tau-b with its p-value) give
the figures scipy.stats' theilslopes and kendalltau give, on the exact and the asymptotic branch, with and without
ties; scipy is a test dependency only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grposcope.diagnose.stats import kendall, theil_sen, trend

scipy_stats = pytest.importorskip("scipy.stats")


def _cases():
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(4, 130))
        x = np.arange(n, dtype=float) if trial % 3 else np.sort(rng.integers(0, n // 2 + 2, n)).astype(float)
        y = [rng.normal(size=n) + 0.03 * x, np.round(rng.normal(size=n), 1), rng.integers(0, 3, n).astype(float),
             np.cumsum(rng.normal(size=n))][trial % 4]
        if np.ptp(y) > 0:
            yield x, y
    for n in (5, 12, 33, 34, 60, 171, 400):  # the exact branch's edges: monotone, one pair swapped
        x = np.arange(n, dtype=float)
        yield x, x.copy()
        yield x, np.r_[x[:-2], x[-1], x[-2]]


@pytest.mark.parametrize("x, y", list(_cases()))
def test_kendall_and_theil_sen_match_scipy(x, y):
    tau, p = kendall(x, y)
    expected = scipy_stats.kendalltau(x, y)
    assert tau == pytest.approx(float(expected.statistic), abs=1e-12)
    assert p == pytest.approx(float(expected.pvalue), rel=1e-9, abs=1e-300)
    slope, intercept = theil_sen(x, y)
    reference = scipy_stats.theilslopes(y, x)
    assert (slope, intercept) == pytest.approx((float(reference.slope), float(reference.intercept)), abs=1e-12)


def test_a_constant_series_has_no_trend():
    x = np.arange(10.0)
    assert all(math.isnan(v) for v in kendall(x, np.ones(10)))
    t = trend(x, np.ones(10))
    assert t.slope == 0.0 and t.p == 1.0
