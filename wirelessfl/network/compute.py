"""Random local compute time: the shifted exponential of user-centric-fl.txt §IV-C.

P(T_i <= t) = 1 - exp(-mu (t - T_min)) for t >= T_min; mu = inf means T_i = T_min.
"""

from __future__ import annotations

import math

import numpy as np

from .profile import SystemProfile


def client_compute_parameters(profile: SystemProfile, num_clients: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-client (t_min, mu): G group values spread over contiguous blocks, client i in group i·G // n."""
    groups = profile.compute_groups
    if groups > num_clients:
        raise ValueError(
            f"t_min/mu give {groups} compute groups but the network has only {num_clients} clients"
        )
    group_of = np.arange(num_clients) * groups // num_clients

    def spread(value: float | tuple[float, ...]) -> np.ndarray:
        values = np.asarray(value if isinstance(value, tuple) else (value,) * groups, dtype=float)
        return values[group_of]

    return spread(profile.t_min), spread(profile.mu)


def scaled_parameters(t_min: np.ndarray, mu: np.ndarray, work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w·(T_min + Exp(mu)) = w·T_min + Exp(mu / w); zero work takes zero time."""
    with np.errstate(divide="ignore"):
        scaled_mu = np.where(work > 0, mu / np.where(work > 0, work, 1.0), math.inf)
    return t_min * work, scaled_mu


def draw_compute_times(t_min: np.ndarray, mu: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per entry; always consumes len(t_min) exponentials, even where mu = inf."""
    return t_min + rng.standard_exponential(len(t_min)) / mu


def harmonic_number(m: int) -> float:
    return float(np.sum(1.0 / np.arange(1, m + 1)))


def expected_max_compute(t_min: np.ndarray, mu: np.ndarray) -> float:
    """E[max_i T_i]. Identical clients: the paper's T_min + H_m/mu. Otherwise the exact
    integral E[max] = a + ∫_a^∞ (1 - Π_i F_i(t)) dt with a = max_i T_min,i, by quadrature."""
    if len(t_min) == 0:
        return 0.0
    if np.all(t_min == t_min[0]) and np.all(mu == mu[0]):
        return float(t_min[0] + harmonic_number(len(t_min)) / mu[0])
    start = float(t_min.max())
    random = np.isfinite(mu)
    if not random.any():
        return start
    shift, rate = t_min[random], mu[random]

    def tail(s: float) -> float:
        with np.errstate(divide="ignore"):
            log_cdf = np.log1p(-np.exp(-rate * (start + s - shift)))
        return float(-np.expm1(np.sum(log_cdf)))

    from scipy import integrate  # a second to import; only this expectation needs it, and reading a scenario must not pay it

    area, _ = integrate.quad(tail, 0.0, math.inf, limit=200)
    return start + area
