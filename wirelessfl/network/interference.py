"""Interference that fades: each fading block's interference power drawn per user (``topology.interference: faded``).

Each other sector j is heard at mean power p_j (in units of the receiver's noise), transmits in a block with
probability ``load`` (its activity) and fades Rayleigh (the interferer's own multipath channel), so its power in a
block is A_j·p_j·h_j with A_j ~ Bernoulli(load), h_j ~ Exp(1): mean load·p_j, variance load·(2 - load)·p_j². The
user's interference in a block is the sum over j. It is drawn as one Gamma variable per user and block (and
subband) with the sum's mean and variance: shape (Σ mean)² / Σ variance, scale Σ variance / Σ mean. This is the
Welch–Satterthwaite moment match of a sum of independent scaled chi-squares, exact for one Rayleigh interferer at
load 1 (Gamma of shape 1 is Exp) and for equal-power interferers at load 1 (a sum of k Exp is Gamma of shape k),
and its mean is the mean-rise model's exactly, which keeps the mean SINR's interference where TR 38.901 §7.8's
geometry SINR puts it. One draw per user and block whatever the number of interferers keeps a 21-sector round
as cheap as a one-cell one, and a user's draws depend only on its own interferers: population-independent.

The shape is rounded to two significant digits (the scale follows, so the mean stays exact), so that a long
transfer's renewal-theory rest (``link.block_bits_moments``) averages over one fixed Gamma sample per shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INTERFERENCE_MODELS = ("mean", "faded")


def _two_digits(values: np.ndarray) -> np.ndarray:
    """Positive values rounded to two significant digits."""
    exponent = np.floor(np.log10(values)) - 1.0
    return np.round(values / 10.0**exponent) * 10.0**exponent


@dataclass(frozen=True)
class FadedInterference:
    """Per user, its interference in noise units: ``mean`` (the mean-rise model's I/N) and the Gamma law of one
    block's draw (``shape``, ``scale``; a user with no interference has mean 0, shape 1 and scale 0)."""

    mean: np.ndarray
    shape: np.ndarray
    scale: np.ndarray

    @classmethod
    def from_moments(cls, mean, variance) -> FadedInterference:
        """The Gamma law of mean ``mean`` and variance ``variance`` per user (shape to two significant digits)."""
        mean, variance = np.asarray(mean, dtype=float), np.asarray(variance, dtype=float)
        heard = (mean > 0) & (variance > 0)
        shape = np.where(heard, _two_digits(np.where(heard, mean * mean / np.where(heard, variance, 1.0), 1.0)), 1.0)
        return cls(mean=np.where(heard, mean, 0.0), shape=shape, scale=np.where(heard, mean / shape, 0.0))

    @classmethod
    def from_powers(cls, powers, load: float) -> FadedInterference:
        """From ``[users, interferers]`` mean received powers in noise units (0 for the serving sector), each
        interferer active with probability ``load`` and Rayleigh faded."""
        p = np.asarray(powers, dtype=float)
        return cls.from_moments(load * p.sum(axis=-1), load * (2.0 - load) * (p * p).sum(axis=-1))

    def subset(self, users) -> FadedInterference:
        """The interference of ``users`` (indices or a mask), in that order."""
        return FadedInterference(self.mean[users], self.shape[users], self.scale[users])

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """One interference power per element of ``shape`` (users first), in noise units: one
        ``standard_gamma`` call of that shape, each user at its own Gamma shape, times its scale."""
        extra = (1,) * (len(shape) - 1)
        drawn = rng.standard_gamma(np.broadcast_to(self.shape.reshape(-1, *extra), shape))
        return np.multiply(self.scale.reshape(-1, *extra), drawn, out=drawn)  # in place: the draws are a new array

    def sinr(self, snr: np.ndarray, gains: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``snr·g / (1 + I)`` for gains ``[users, ...]`` of users with signal-to-noise ratios ``snr``, I drawn here
        (computed in place in the new arrays, the same operations in the same order)."""
        extra = (1,) * (gains.ndim - 1)
        signal = np.asarray(snr, dtype=float).reshape(-1, *extra) * gains
        rise = self.draw(rng, gains.shape)
        np.add(1.0, rise, out=rise)
        return np.divide(signal, rise, out=signal)
