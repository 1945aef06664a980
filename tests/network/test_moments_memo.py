"""``link.block_bits_moments`` remembers each user's moments (subbands, faded interference): the numbers are the ones
a fresh call computes, whichever users share the call and in whatever order."""

from __future__ import annotations

import numpy as np
import pytest

from wirelessfl.network import link
from wirelessfl.network.interference import FadedInterference


@pytest.mark.parametrize("faded", [False, True])
def test_remembered_moments_are_a_fresh_calls(faded):
    rng = np.random.default_rng(0)
    users = 40
    snr = 10 ** rng.uniform(-0.5, 2.5, users)
    bw = np.full(users, 1e6)
    interference = FadedInterference.from_moments(rng.uniform(0.1, 5.0, users), rng.uniform(0.1, 5.0, users)) if faded else None

    def moments(rows):
        sub = None if interference is None else interference.subset(rows)
        return np.stack(link.block_bits_moments(bw[rows], snr[rows], 0.01, "rayleigh", None, "shannon", 2, sub))

    link._MOMENTS.clear()
    fresh = moments(np.arange(users))
    assert len(link._MOMENTS[id(link.LINKS["shannon"])][1]) == users
    order = rng.permutation(users)[:25]
    np.testing.assert_array_equal(moments(order), fresh[:, order])  # all from the table
    link._MOMENTS.clear()
    alone = np.concatenate([moments(np.array([u])) for u in order[:5]], axis=1)  # one user a call, computed afresh
    np.testing.assert_array_equal(alone, fresh[:, order[:5]])
    np.testing.assert_array_equal(moments(order), fresh[:, order])  # 5 remembered, 20 computed together


def test_a_full_table_is_emptied_and_refilled(monkeypatch):
    monkeypatch.setattr(link, "MOMENTS_KEPT", 10)
    link._MOMENTS.clear()
    snr = np.linspace(1.0, 50.0, 8)
    first = np.stack(link.block_bits_moments(1e6, snr, 0.01, subbands=2))
    again = np.stack(link.block_bits_moments(1e6, snr[::-1] + 1.0, 0.01, subbands=2))  # 8 more: over 10, emptied
    assert len(link._MOMENTS[id(link.LINKS["shannon"])][1]) == 8
    np.testing.assert_array_equal(np.stack(link.block_bits_moments(1e6, snr, 0.01, subbands=2)), first)
    assert again.shape == (3, 8)
