"""Robust statistics the detectors decide with.

- Trends: Theil-Sen slope (the median of pairwise slopes: a few wild steps cannot tilt it, unlike least squares)
  with the Mann-Kendall test (Kendall's tau between step and value: is there a monotone trend at all?), in numpy
  (`theil_sen`, `kendall`: the figures of scipy.stats' theilslopes and kendalltau, as tests/test_stats.py
  checks; scipy alone took 0.7 s to import and most of a plain install's size). A series longer than
  `MAX_POINTS` is first reduced to the medians of equal-count bins, so a 100,000-step log costs as much as a
  400-step one (Theil-Sen is quadratic in the points) and the test's p-value is not made tiny by sheer length:
  400 bins of a long run ask "is the run-scale trend real", not "is a slope of 1e-9 per step non-zero".
- Levels: medians of a head or tail share of the run, never a single step.
- Spikes: the robust z-score of log values against a rolling median and the median absolute deviation.

Notation: `x` steps, `y` values, both finite and of equal length n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_POINTS = 400  # bins a long series is reduced to before a trend is fitted
MAD_SCALE = 1.4826  # MAD * this estimates the standard deviation of normal data


@dataclass(frozen=True)
class Trend:
    slope: float  # Theil-Sen slope, value per step
    intercept: float
    tau: float  # Kendall's tau between step and value, in [-1, 1]
    p: float  # two-sided Mann-Kendall p-value (1.0 when it cannot be computed)
    n: int  # points fitted (after binning)

    def rising(self, alpha: float = 0.01) -> bool:
        return self.p < alpha and self.slope > 0

    def falling(self, alpha: float = 0.01) -> bool:
        return self.p < alpha and self.slope < 0

    def at(self, step: float) -> float:
        return self.intercept + self.slope * step



def finite(x: list[int] | np.ndarray, y: list[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs whose value is finite.  -> (x (n,), y (n,))."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(y)
    if keep.all():  # a dense log: the arrays themselves, no copy (a long run holds one per metric)
        return x, y
    return x[keep], y[keep]


def binned(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most `max_points` points: the medians of equal-count consecutive bins (x and y binned alike)."""
    if len(y) <= max_points:
        return x, y
    size = -(-len(y) // max_points)  # values per bin; the last bin holds the rest
    bins = -(-len(y) // size)
    pad = bins * size - len(y)

    def medians(v: np.ndarray) -> np.ndarray:  # one vectorised call, NaN padding ignored
        return np.nanmedian(np.concatenate([v.astype(float), np.full(pad, np.nan)]).reshape(bins, size), axis=1)

    return medians(x), medians(y)


def trend(x: np.ndarray, y: np.ndarray) -> Trend:
    """Theil-Sen slope and Mann-Kendall test of y against x; slope 0 and p = 1 with fewer than 4 points or a
    constant y."""
    x, y = binned(*finite(x, y))
    if len(y) < 4 or np.ptp(y) == 0 or np.ptp(x) == 0:
        return Trend(0.0, float(np.median(y)) if len(y) else 0.0, 0.0, 1.0, len(y))
    slope, intercept = theil_sen(x, y)
    tau, p = kendall(x, y)
    return Trend(slope, intercept, tau if math.isfinite(tau) else 0.0, p if math.isfinite(p) else 1.0, len(y))


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(slope, intercept): the median of the slopes between every two points with different x, and the line
    through the medians of y and x with that slope (Sen 1968, "Estimates of the regression coefficient based on
    Kendall's tau"). x, y: (n,)."""
    dx = x[None, :] - x[:, None]  # (n, n)
    dy = y[None, :] - y[:, None]
    pairs = dx > 0
    slope = float(np.median(dy[pairs] / dx[pairs]))
    return slope, float(np.median(y) - slope * np.median(x))


def kendall(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Kendall's tau-b between x and y and its two-sided p-value under no association (Kendall, "Rank
    Correlation Methods", 1970): without ties and up to 33 points (or at most one discordant or concordant pair)
    the exact permutation distribution of the discordant pairs; otherwise the normal approximation of
    S = concordant - discordant, its variance corrected for the tied groups of x and of y. NaN, NaN when x or
    y is constant. x, y: (n,)."""
    n = len(x)
    upper = np.triu_indices(n, 1)
    sx = np.sign(x[None, :] - x[:, None])[upper]  # (n(n-1)/2,) each pair once
    sy = np.sign(y[None, :] - y[:, None])[upper]
    total = n * (n - 1) // 2
    x_ties, y_ties = int((sx == 0).sum()), int((sy == 0).sum())
    if x_ties == total or y_ties == total:
        return math.nan, math.nan
    s = int((sx * sy).sum())  # concordant - discordant
    discordant = int((sx * sy < 0).sum())
    tau = max(-1.0, min(1.0, s / math.sqrt(total - x_ties) / math.sqrt(total - y_ties)))
    if x_ties == 0 and y_ties == 0 and (n <= 33 or min(discordant, total - discordant) <= 1):
        return tau, _kendall_exact(n, min(discordant, total - discordant))
    tx, ty = _tie_groups(x), _tie_groups(y)  # sizes of the groups of equal values
    m = n * (n - 1)
    var = ((m * (2 * n + 5) - float((tx * (tx - 1) * (2 * tx + 5)).sum()) - float((ty * (ty - 1) * (2 * ty + 5)).sum()))
           / 18 + float((tx * (tx - 1)).sum()) * float((ty * (ty - 1)).sum()) / (2 * m)
           + float((tx * (tx - 1) * (tx - 2)).sum()) * float((ty * (ty - 1) * (ty - 2)).sum()) / (9 * m * (n - 2)))
    return tau, math.erfc(abs(s) / math.sqrt(var) / math.sqrt(2))


def _tie_groups(v: np.ndarray) -> np.ndarray:
    _, counts = np.unique(v, return_counts=True)
    return counts[counts > 1].astype(float)


def _kendall_exact(n: int, c: int) -> float:
    """Two-sided P(D <= c or D >= total - c) for the discordant pairs D of a random permutation of n: twice the
    lower tail (the distribution is symmetric), the counts of permutations by inversions built one element at a
    time (element j adds 0 .. j - 1 inversions)."""
    total = n * (n - 1) // 2
    if 2 * c >= total:
        return 1.0
    counts = np.zeros(c + 1)
    counts[0] = 1.0
    for j in range(2, n + 1):  # counts of permutations of j elements by inversions, up to c
        window = np.cumsum(counts)
        shifted = np.concatenate([np.zeros(j), window[:-j]]) if j <= c else np.zeros(c + 1)
        counts = window - shifted[: c + 1]
    # n! overflows a float past 170 (a long monotone series: c <= 1 there, so the sum stays small)
    return min(1.0, 2.0 * math.exp(math.log(float(counts.sum())) - math.lgamma(n + 1)))


def head(y: np.ndarray, share: float = 0.1, least: int = 3) -> np.ndarray:
    """The first `share` of the values (at least `least`, at most all)."""
    return y[: min(len(y), max(least, int(math.ceil(len(y) * share))))]


def tail(y: np.ndarray, share: float = 0.25, least: int = 3) -> np.ndarray:
    """The last `share` of the values (at least `least`, at most all)."""
    return y[-min(len(y), max(least, int(math.ceil(len(y) * share)))):]


SHORT_RUN = 8  # below this many logged points a trend cannot be judged: a finding speaks of the points it has


def where_text(x: np.ndarray) -> str:
    """The logged steps a level was read over, in words: 'the one logged step (12)', 'the 3 logged steps
    (10-30)'."""
    if len(x) == 1:
        return f"the one logged step ({int(x[0])})"
    return f"the {len(x)} logged steps ({int(x[0])}-{int(x[-1])})"


def level(y: np.ndarray) -> float:
    """The median, NaN for no values."""
    return float(np.median(y)) if len(y) else math.nan


def mad(y: np.ndarray) -> float:
    """Median absolute deviation, scaled to a standard deviation."""
    return float(MAD_SCALE * np.median(np.abs(y - np.median(y)))) if len(y) else math.nan


def rolling_median(y: np.ndarray, window: int) -> np.ndarray:
    """The median of the `window` values before each one (itself excluded); NaN where none came before."""
    out = np.full(len(y), np.nan)
    if len(y) < 2:
        return out
    from numpy.lib.stride_tricks import sliding_window_view

    if len(y) > window:
        out[window:] = np.median(sliding_window_view(y[:-1], window), axis=1)
    for i in range(1, min(window, len(y))):
        out[i] = np.median(y[:i])
    return out


def smooth(y: np.ndarray, k: int = 3) -> np.ndarray:
    """The running median of `k` consecutive values ending at each one (fewer at the start), vectorised."""
    from numpy.lib.stride_tricks import sliding_window_view

    padded = np.concatenate([np.full(k - 1, np.nan), np.asarray(y, dtype=float)])
    return np.nanmedian(sliding_window_view(padded, k), axis=1)


def hinge(x: np.ndarray, y: np.ndarray) -> tuple[int, float, float, float] | None:
    """The least-squares fit y = a + s * min(x, x_b) over every breakpoint b (a rise, then flat): (b's index, the
    fitted start a + s * x_0, the fitted top a + s * x_b, the robust SD of the residuals). None below 6 points.
    Fitted to every point, so one low and one high point of the noise cannot make a rise."""
    n = len(y)
    if n < 6:
        return None
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    f = np.minimum(x[None, :], x[2:n - 1, None])  # (b, n): the feature for each breakpoint, at least 2 points before
    fm = f.mean(axis=1, keepdims=True)
    var = ((f - fm) ** 2).sum(axis=1)
    slope = np.where(var > 0, ((f - fm) * (y - y.mean())).sum(axis=1) / np.where(var > 0, var, 1), 0.0)
    resid = y - y.mean() - slope[:, None] * (f - fm)
    best = int(np.argmin((resid ** 2).sum(axis=1)))
    b = best + 2
    a = y.mean() - slope[best] * fm[best, 0]
    return b, float(a + slope[best] * x[0]), float(a + slope[best] * x[b]), mad(resid[best])


def longest_streak(mask: np.ndarray) -> int:
    best = run = 0
    for on in mask:
        run = run + 1 if on else 0
        best = max(best, run)
    return best


def crossing(t: Trend, target: float, after: float) -> float | None:
    """The step at which the fitted line reaches `target`, if it heads there after step `after`; else None."""
    if t.slope == 0:
        return None
    step = (target - t.intercept) / t.slope
    return step if step > after else None
