"""How sure a mean over seeds is: the half-width of its Student-t confidence interval.

Tables, figures and trade-off maps print a mean over seeds with this interval,
so that two methods whose intervals overlap are read as a tie rather than a
ranking (with 2 seeds t = 12.7, with 3 seeds 4.3, with 5 seeds 2.8).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
"""Coverage of every interval over seeds the results print."""


def interval_half_width(values, confidence: float = CONFIDENCE) -> float:
    """Half-width of the Student-t interval of the mean of ``values``; NaN with fewer than two (or with a NaN)."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2:
        return math.nan
    return float(stats.t.ppf(0.5 + confidence / 2, n - 1) * np.std(values, ddof=1) / math.sqrt(n))
