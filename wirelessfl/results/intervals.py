"""How sure a mean over seeds is: the half-width of its Student-t confidence interval.

Tables, figures and trade-off maps print a mean over seeds with this interval,
so that two methods whose intervals overlap are read as a tie rather than a
ranking (with 2 seeds t = 12.7, with 3 seeds 4.3, with 5 seeds 2.8). Every
curve of a seed shares its random numbers, so two curves are compared sharper
by their seed-by-seed difference (:func:`paired_difference`): it is free of the
spread from seed to seed that both curves' own intervals carry.
"""

from __future__ import annotations

import math

import numpy as np

CONFIDENCE = 0.95
"""Coverage of every interval over seeds the results print."""


def _t_quantile(confidence: float, df: int) -> float:
    """The two-sided Student-t quantile; scipy.stats loads here, not when a run starts (it costs a second)."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def interval_half_width(values, confidence: float = CONFIDENCE) -> float:
    """Half-width of the Student-t interval of the mean of ``values``; NaN with fewer than two (or with a NaN)."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2:
        return math.nan
    return float(_t_quantile(confidence, n - 1) * np.std(values, ddof=1) / math.sqrt(n))


def paired_difference(a: dict, b: dict, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """``a - b`` over the seeds both hold (``{seed: value}``, NaN values left out): the mean difference and the
    half-width of its Student-t interval (NaN under two shared seeds; the mean is NaN without any)."""
    diff = [a[s] - b[s] for s in a.keys() & b.keys() if not (math.isnan(a[s]) or math.isnan(b[s]))]
    return (float(np.mean(diff)) if diff else math.nan), interval_half_width(diff, confidence)


def sample_mean_interval(values, population: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The ``confidence`` interval of a population's mean from a simple random sample of it drawn without
    replacement (``values``, n of ``population`` N): ``mean -+ t(n-1) * sqrt((1 - n/N) * s^2 / n)``, with
    ``s^2`` the sample variance (n - 1 in the denominator) and ``1 - n/N`` the finite-population correction
    (Cochran, Sampling Techniques, 3rd ed., 1977, ch. 2: the unbiased
    variance estimate v(mean) = (1 - f) s^2 / n of simple random sampling, f = n/N). ``n = N`` gives the exact mean with
    zero width; NaN with fewer than two values."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2 or n > population:
        return math.nan, math.nan
    mean = float(values.mean())
    half = float(_t_quantile(confidence, n - 1) * math.sqrt((1 - n / population) * np.var(values, ddof=1) / n))
    return mean - half, mean + half
