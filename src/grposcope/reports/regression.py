"""Least squares of one figure on another over runs, with Pearson's r and its p-value.

The ACR paper ("Advantage Collapse in Group Relative Policy Optimization: Diagnosis and Mitigation",
arXiv 2605.21125) fits final accuracy against `acr_100`, the mean ACR over the first 100 steps, across runs;
`grposcope report --regress` makes the same fit over the runs it is given. Plain Python (no scipy): the p-value
of r comes from Student's t with n - 2 degrees of freedom, whose CDF is a regularised incomplete beta function,
evaluated here by its continued fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_RUNS = 3  # a line through two points fits exactly: r = +-1 and no degree of freedom left to test it


@dataclass(frozen=True)
class Fit:
    """y = intercept + slope * x over n points."""

    n: int
    slope: float
    intercept: float
    r: float  # Pearson's correlation
    r2: float  # the fraction of y's variance the line explains (= r^2 for a line with an intercept)
    p_value: float  # two-sided, of H0: no correlation (Student's t, n - 2 degrees of freedom)

    def predict(self, x: float) -> float:
        return self.intercept + self.slope * x


def fit_line(x: list[float], y: list[float]) -> Fit:
    """The least-squares line of y on x.

    slope = Sxy / Sxx, intercept = mean(y) - slope * mean(x), r = Sxy / sqrt(Sxx * Syy), with
    Sxy = sum (x - mean x)(y - mean y). Fails with fewer than 3 points or when every x (or every y) is equal.
    """
    if len(x) != len(y):
        raise ValueError(f"x and y differ in length ({len(x)} and {len(y)})")
    n = len(x)
    if n < MIN_RUNS:
        raise ValueError(f"a regression needs at least {MIN_RUNS} runs, got {n}: a line through "
                         f"{'two points fits them exactly' if n == 2 else 'one point is not determined'}, "
                         "so r and its p-value would mean nothing; add runs (grposcope sweep makes a grid)")
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y))
    if sxx == 0 or syy == 0:
        which = "x" if sxx == 0 else "y"
        raise ValueError(f"every run has the same {which} value, so no line (and no correlation) can be fitted")
    slope = sxy / sxx
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))
    return Fit(n, slope, my - slope * mx, r, r * r, correlation_p_value(r, n))


def correlation_p_value(r: float, n: int) -> float:
    """Two-sided p-value of a sample correlation r over n points: t = r sqrt((n - 2) / (1 - r^2)) against
    Student's t with n - 2 degrees of freedom, p = I_{df / (df + t^2)}(df / 2, 1 / 2)."""
    df = n - 2
    if abs(r) >= 1.0:
        return 0.0
    t2 = r * r * df / (1.0 - r * r)
    return regularized_beta(df / (df + t2), df / 2.0, 0.5)


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with df degrees of freedom, for 0.5 <= p < 1: the t with
    P(|T| > t) = 2 (1 - p), found by bisection on that two-sided tail, I_{df / (df + t^2)}(df / 2, 1 / 2)."""
    if not 0.5 <= p < 1.0 or df < 1:
        raise ValueError(f"t_quantile takes 0.5 <= p < 1 and df >= 1, got p={p}, df={df}")
    tail = 2.0 * (1.0 - p)
    lo, hi = 0.0, 1.0
    while regularized_beta(df / (df + hi * hi), df / 2.0, 0.5) > tail:  # widen until the tail is small enough
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if regularized_beta(df / (df + mid * mid), df / 2.0, 0.5) > tail else (lo, mid)
    return (lo + hi) / 2.0


def mean_t_interval(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """The mean of `values` and the half-width of its `level` t interval (n - 1 degrees of freedom): paired
    differences over seeds are read this way."""
    n = len(values)
    if n < 2:
        raise ValueError(f"a t interval needs at least 2 values, got {n}")
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, t_quantile(0.5 + level / 2.0, n - 1) * sd / math.sqrt(n)


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularised incomplete beta function, for 0 <= x <= 1 and a, b > 0.

    The continued fraction (modified Lentz) converges fast for x < (a + 1) / (a + b + 2); above that the
    symmetry I_x(a, b) = 1 - I_{1-x}(b, a) is used.
    """
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must lie in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float, tiny: float = 1e-300, eps: float = 1e-15) -> float:
    """The continued fraction of I_x(a, b) (Numerical Recipes' betacf), by the modified Lentz method."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h
