"""The link model's input checks at their boundaries, found untested by the mutation check: the value each error line
names (the first bad one), and the values just inside each range, which must pass."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wirelessfl.network import link
from wirelessfl.network.interference import FadedInterference

RNG = np.random.default_rng


def _message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


def test_the_error_names_the_first_bad_value():
    values = [2.0, 0.5, 0.0, -2.0, -3.0]  # 0 and 0.5 are allowed: the first bad one is -2
    assert _message(lambda: link.shannon(values)) == "snr must be a linear power ratio >= 0, got -2"
    assert _message(lambda: link.transfer_time(values, 1e6, 1.0, RNG(0), 1e-3)) == "bits must be >= 0 and finite (bits), got -2"
    assert _message(lambda: link.transfer_time(1e6, [1.0, 0.0, math.inf], 1.0, RNG(0), 1e-3)) == (
        "bandwidth_hz must be >= 0 and finite (Hz), got inf"
    )


def test_truncated_shannon_takes_alpha_1_and_a_cap_below_1_but_not_0_or_inf():
    assert float(link.truncated_shannon(3.0, alpha=1.0)) == 2.0  # log2(4), under the 4.4 cap
    assert float(link.truncated_shannon(3.0, max_se=0.5)) == 0.5
    assert _message(lambda: link.truncated_shannon(3.0, alpha=0.0)) == (
        "alpha must be in (0, 1] (an attenuation of the Shannon bound), got 0.0"
    )
    assert _message(lambda: link.truncated_shannon(3.0, max_se=0.0)) == "max_se must be > 0 and finite (bit/s/Hz), got 0.0"
    assert _message(lambda: link.truncated_shannon(3.0, max_se=math.inf)) == "max_se must be > 0 and finite (bit/s/Hz), got inf"


def test_rician_k_factors_must_be_finite_and_one_per_user():
    assert _message(lambda: link.draw_fading(RNG(0), 3, "rician", math.inf)) == (
        "k_factor must be a linear K-factor >= 0 and finite for rician fading, got inf"
    )
    assert _message(lambda: link.draw_fading(RNG(0), (2,), "rician", np.ones((2, 1)))) == (
        "k_factor must be linear K-factors >= 0 and finite for rician fading, one per user"
    )


def test_coherence_time_takes_a_carrier_below_1_ghz_but_not_0_or_an_infinite_speed_or_carrier():
    # f_D = 1 m/s · 0.5 GHz / c = 1.6667 Hz; T_c = 0.423 / f_D = 0.2538 s
    assert link.coherence_time_s(1.0, 0.5) == pytest.approx(0.423 / (0.5e9 / 3.0e8), rel=1e-15)
    assert _message(lambda: link.coherence_time_s(1.0, 0.0)) == "fc_ghz must be > 0 and finite (GHz), got 0.0"
    assert _message(lambda: link.coherence_time_s(1.0, math.inf)) == "fc_ghz must be > 0 and finite (GHz), got inf"
    assert _message(lambda: link.coherence_time_s(math.inf, 3.5)) == "speed_m_s must be >= 0 and finite (m/s), got inf"


@pytest.mark.parametrize("value", [2.5, True])
def test_subbands_and_max_blocks_must_be_integers(value):
    assert _message(lambda: link.transfer_time(1e6, 1e6, 1.0, RNG(0), 1e-3, subbands=value)) == (
        f"subbands must be an integer >= 1, got {value!r}"
    )
    assert _message(lambda: link.multicast_transfer(1e6, 1e6, np.ones(2), RNG(0), 1e-3, max_blocks=value)) == (
        f"max_blocks must be an integer >= 1, got {value!r}"
    )


def test_faded_interference_needs_one_entry_per_user():
    two = FadedInterference.from_moments(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    assert _message(lambda: link.transfer_time(np.ones(3), 1e6, 1.0, RNG(0), 1e-3, interference=two)) == (
        "interference must be a FadedInterference of one entry per user (3)"
    )


@pytest.mark.parametrize("coherence_s, fading", [(1e-3, "none"), (math.inf, "rayleigh")])
def test_faded_interference_needs_block_fading(coherence_s, fading):
    faded = FadedInterference.from_moments(np.array([1.0]), np.array([1.0]))
    assert _message(lambda: link.transfer_time(1e6, 1e6, 1.0, RNG(0), coherence_s, fading=fading, interference=faded)) == (
        "faded interference needs block fading (finite coherence_s) and a fading model other than 'none'"
    )


def test_a_coverage_multicast_checks_q_even_with_nothing_to_send():
    assert _message(lambda: link.multicast_transfer(0.0, 1e6, np.ones(2), RNG(0), 1e-3, policy="coverage", q=0.0)) == (
        "q must be in (0, 1] (the fraction of receivers the stream's rate must serve), got 0.0"
    )
