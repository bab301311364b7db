"""The regression behind `grposcope report --regress`: hand-worked least squares, r, R^2 and p-values."""

from __future__ import annotations

import math

import pytest

from grposcope.reports.regression import (
    correlation_p_value,
    fit_line,
    mean_t_interval,
    regularized_beta,
    t_quantile,
)


def test_a_four_point_fit_worked_by_hand():
    # x = 0, 1, 2, 3 and y = 1, 3, 2, 5: mean x = 1.5, mean y = 2.75.
    # deviations dx = -1.5, -0.5, 0.5, 1.5; dy = -1.75, 0.25, -0.75, 2.25
    # Sxx = 2.25 + 0.25 + 0.25 + 2.25 = 5
    # Sxy = 2.625 - 0.125 - 0.375 + 3.375 = 5.5
    # Syy = 3.0625 + 0.0625 + 0.5625 + 5.0625 = 8.75
    # slope = 5.5 / 5 = 1.1; intercept = 2.75 - 1.1 * 1.5 = 1.1
    # r = 5.5 / sqrt(5 * 8.75) = 5.5 / 6.614378 = 0.831522; R^2 = 30.25 / 43.75 = 0.691429
    # With n - 2 = 2 degrees of freedom, t = r sqrt(2 / (1 - r^2)) and t^2 + 2 = 2 / (1 - r^2), so the
    # t CDF 1/2 + t / (2 sqrt(t^2 + 2)) gives the two-sided p = 1 - t / sqrt(t^2 + 2) = 1 - r = 0.168478.
    fit = fit_line([0, 1, 2, 3], [1, 3, 2, 5])
    assert fit.n == 4
    assert fit.slope == pytest.approx(1.1, abs=1e-12)
    assert fit.intercept == pytest.approx(1.1, abs=1e-12)
    assert fit.r == pytest.approx(0.831522, abs=1e-6)
    assert fit.r2 == pytest.approx(0.691429, abs=1e-6)
    assert fit.p_value == pytest.approx(0.168478, abs=1e-6)
    assert fit.predict(2.0) == pytest.approx(3.3, abs=1e-12)  # 1.1 + 1.1 * 2


def test_a_falling_line_like_the_papers():
    # y = 0.5 - 0.3 x exactly on three points: slope -0.3, intercept 0.5, r = -1, R^2 = 1, p = 0
    fit = fit_line([0.2, 0.5, 0.8], [0.44, 0.35, 0.26])
    assert fit.slope == pytest.approx(-0.3, abs=1e-12) and fit.intercept == pytest.approx(0.5, abs=1e-12)
    assert fit.r == pytest.approx(-1.0, abs=1e-12) and fit.r2 == pytest.approx(1.0, abs=1e-12)
    assert fit.p_value == 0.0


@pytest.mark.parametrize("t, df, p", [
    (3.182446, 3, 0.05),   # the 5% two-sided critical value of t with 3 degrees of freedom (t tables)
    (2.228139, 10, 0.05),  # ... with 10
    (3.169273, 10, 0.01),  # the 1% value with 10
    (1.0, 1, 0.5),         # t with 1 degree of freedom is Cauchy: P(|T| > 1) = 1 - 2 atan(1) / pi = 0.5
])
def test_p_values_match_t_tables(t, df, p):
    r = t / math.sqrt(t * t + df)  # the correlation whose t statistic is t: t = r sqrt(df / (1 - r^2))
    assert correlation_p_value(r, df + 2) == pytest.approx(p, abs=2e-6)


def test_regularized_beta_known_values():
    # I_x(1, 1) = x (the uniform CDF); I_x(2, 1) = x^2; I_x(1, 2) = 1 - (1 - x)^2
    assert regularized_beta(0.3, 1.0, 1.0) == pytest.approx(0.3, abs=1e-12)
    assert regularized_beta(0.3, 2.0, 1.0) == pytest.approx(0.09, abs=1e-12)
    assert regularized_beta(0.3, 1.0, 2.0) == pytest.approx(0.51, abs=1e-12)  # 1 - 0.49
    assert regularized_beta(0.0, 2.0, 3.0) == 0.0 and regularized_beta(1.0, 2.0, 3.0) == 1.0


def test_too_few_or_degenerate_runs_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="at least 3 runs, got 2: a line through two points fits them exactly"):
        fit_line([0.1, 0.2], [0.3, 0.4])
    with pytest.raises(ValueError, match="same x value"):
        fit_line([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="differ in length"):
        fit_line([0.1, 0.2, 0.3], [0.1, 0.2])


@pytest.mark.parametrize("df, q975", [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (29, 2.045), (120, 1.980)])
def test_t_quantiles_match_the_printed_table(df, q975):
    # two-sided 95% critical values of Student's t, as printed in any statistics table (3 decimals)
    assert t_quantile(0.975, df) == pytest.approx(q975, abs=6e-4)


def test_t_quantile_of_one_degree_is_the_cauchy_one():
    # t with 1 degree of freedom is Cauchy: its p-quantile is tan(pi (p - 1/2)), exactly
    for p in (0.6, 0.9, 0.995):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)


def test_a_paired_t_interval_worked_by_hand():
    # differences 0.1, -0.1, 0.3, 0.1: mean 0.1, sample sd sqrt((0 + 0.04 + 0.04 + 0) / 3) = 0.163299,
    # SE = 0.081650, t(0.975, 3) = 3.182446: half-width 0.259846; the interval holds 0: not decided
    mean, half = mean_t_interval([0.1, -0.1, 0.3, 0.1])
    assert mean == pytest.approx(0.1, abs=1e-12)
    assert half == pytest.approx(0.259846, abs=1e-6)
    with pytest.raises(ValueError, match="at least 2 values"):
        mean_t_interval([0.5])
    with pytest.raises(ValueError, match="0.5 <= p < 1"):
        t_quantile(0.3, 5)
