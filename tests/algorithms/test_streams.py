"""Stream formation (wirelessfl/algorithms/streams.py): the paper's k-means on W's rows and the alternatives."""

from __future__ import annotations

import numpy as np
import pytest

from wirelessfl.algorithms.streams import (
    FORMATIONS,
    choose_streams_by_silhouette,
    downlink_time,
    form_streams,
    merge_small_streams,
    peer_rows,
    rate_tiers,
    stream_mixing,
    stream_sizes,
)

ALTERNATIVES = ["kmeans_offdiag", "spectral", "agglomerative"]
GROUPS = np.repeat(np.arange(4), 10)
OUTLIERS = [0, 10, 20]


def block_weights(groups, noise, seed, outliers=(), self_weight=0.95):
    """Rows: uniform on the own group plus ``noise`` x U(0, 1) everywhere, normalised; an outlier keeps
    ``self_weight`` on itself and scales the rest of its row down (eq. 6 for a client far from everybody)."""
    rng = np.random.default_rng(seed)
    same = (groups[:, None] == groups[None, :]).astype(float) + noise * rng.random((len(groups), len(groups)))
    w = same / same.sum(axis=1, keepdims=True)
    for i in outliers:
        w[i] *= (1 - self_weight) / (1 - w[i, i])
        w[i, i] = self_weight
    return w


@pytest.fixture(scope="module")
def outlier_w():
    return block_weights(GROUPS, 0.5, 0, OUTLIERS)


@pytest.mark.parametrize("formation", ALTERNATIVES)
def test_alternatives_recover_the_blocks_despite_outliers(outlier_w, formation):
    assignment = form_streams(outlier_w, 4, seed=0, formation=formation)
    np.testing.assert_array_equal(assignment, GROUPS)


def test_kmeans_on_rows_gives_the_outliers_their_own_streams(outlier_w):
    # The measured fact of EMNIST scenario 2 (97 + 1 + 1 + 1) in miniature: 37 + 1 + 1 + 1.
    assignment = form_streams(outlier_w, 4, seed=0, formation="kmeans_rows")
    assert stream_sizes(assignment) == [37, 1, 1, 1]
    singletons = [int(np.flatnonzero(assignment == c)[0]) for c in range(4) if (assignment == c).sum() == 1]
    assert sorted(singletons) == OUTLIERS


@pytest.mark.parametrize("formation", ALTERNATIVES)
def test_auto_picks_the_four_groups_with_the_outliers(outlier_w, formation):
    k, scores = choose_streams_by_silhouette(outlier_w, range(2, 8), seed=0, formation=formation)
    assert k == 4 and sorted(scores) == list(range(2, 8))


@pytest.mark.parametrize("formation", list(FORMATIONS))
def test_auto_picks_four_clean_blocks_with_each_method(formation):
    w = block_weights(np.repeat(np.arange(4), 5), 0.05, 4)
    k, scores = choose_streams_by_silhouette(w, range(2, 9), seed=0, formation=formation)
    assert k == 4 and scores[4] == max(scores.values())


@pytest.mark.parametrize("formation", list(FORMATIONS))
def test_one_stream_is_the_mean_row(outlier_w, formation):
    mixing, assignment = stream_mixing(outlier_w, 1, seed=0, formation=formation)
    np.testing.assert_array_equal(assignment, np.zeros(40))
    mean = outlier_w.mean(axis=0)
    np.testing.assert_allclose(mixing, (mean / mean.sum())[None, :], rtol=1e-14)


@pytest.mark.parametrize("formation", list(FORMATIONS))
@pytest.mark.parametrize("k", [40, 41])
def test_k_at_least_m_is_per_user_aggregation(outlier_w, formation, k):
    mixing, assignment = stream_mixing(outlier_w, k, seed=0, formation=formation)
    np.testing.assert_array_equal(assignment, np.arange(40))
    np.testing.assert_array_equal(mixing, outlier_w)


@pytest.mark.parametrize("formation", list(FORMATIONS))
def test_same_seed_same_streams(formation):
    w = block_weights(np.repeat(np.arange(3), 5), 2.0, 3)
    first = stream_mixing(w, 4, seed=11, formation=formation)
    again = stream_mixing(w, 4, seed=11, formation=formation)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])


def test_mixing_rows_are_the_members_mean_rows(outlier_w):
    mixing, assignment = stream_mixing(outlier_w, 4, seed=0, formation="spectral")
    for c in range(4):
        mean = outlier_w[assignment == c].mean(axis=0)
        np.testing.assert_allclose(mixing[c], mean / mean.sum(), rtol=1e-14)


def test_peer_rows_by_hand():
    # Row 0: self 0.8, peers 0.15 and 0.05 -> self capped at 0.15: (0.15, 0.15, 0.05) / 0.35.
    # Row 2: no weight on any peer -> the client alone.
    w = np.array([[0.8, 0.15, 0.05], [0.2, 0.2, 0.6], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(
        peer_rows(w), [[3 / 7, 3 / 7, 1 / 7], [0.2 / 1.4, 0.6 / 1.4, 0.6 / 1.4], [0, 0, 1]], rtol=1e-14
    )


def test_a_pair_of_clients_has_identical_peer_rows():
    # With the diagonal set to 0 the two rows would be orthogonal; capped, they are equal.
    w = np.array([[0.9, 0.1, 0.0], [0.3, 0.7, 0.0], [0.0, 0.0, 1.0]])
    p = peer_rows(w)
    np.testing.assert_allclose(p[0], p[1], rtol=1e-14)


def test_min_stream_size_merges_into_the_stream_relied_on_most():
    # Streams {0, 1, 2}, {3}, {4}. Size 1 < 2: stream {3} goes first (lowest label among the smallest);
    # client 3 puts 0.5 on {4} and 0.3 on {0, 1, 2} -> {3, 4}, now of size 2: done.
    w = np.array(
        [
            [0.5, 0.2, 0.2, 0.05, 0.05],
            [0.2, 0.5, 0.2, 0.05, 0.05],
            [0.2, 0.2, 0.5, 0.05, 0.05],
            [0.1, 0.1, 0.1, 0.2, 0.5],
            [0.3, 0.3, 0.2, 0.1, 0.1],
        ]
    )
    merged = merge_small_streams(w, np.array([0, 0, 0, 1, 2]), 2)
    np.testing.assert_array_equal(merged, [0, 0, 0, 1, 1])
    # min size 3: {3, 4} (mass 0.3 + 0.8 on {0, 1, 2}) joins the rest; one stream is always allowed.
    np.testing.assert_array_equal(merge_small_streams(w, np.array([0, 0, 0, 1, 2]), 3), np.zeros(5))
    np.testing.assert_array_equal(merge_small_streams(w, np.array([0, 0, 0, 1, 2]), 1), [0, 0, 0, 1, 2])


def test_min_stream_size_folds_the_kmeans_outliers_back(outlier_w):
    # k-means on the rows gives 37 + 1 + 1 + 1; with min_stream_size 2 each outlier rejoins the stream of its group.
    assignment = form_streams(outlier_w, 4, seed=0, formation="kmeans_rows", min_stream_size=2)
    assert stream_sizes(assignment) == [40]


def test_auto_scores_the_merged_clustering(outlier_w):
    # Every k of k-means on the rows spends streams on the three outliers; merged back (min size 2), a k
    # whose remaining streams are all outliers becomes a single stream and scores -1.
    _, scores = choose_streams_by_silhouette(outlier_w, [2, 3, 4], seed=0, formation="kmeans_rows", min_stream_size=2)
    _, raw = choose_streams_by_silhouette(outlier_w, [2, 3, 4], seed=0, formation="kmeans_rows")
    assert scores[4] == -1.0 and raw[4] > 0


# -- channel-aware grouping ----------------------------------------------------------

#: Two data groups (0-3, 4-7); inside each, pairs (0, 1), (2, 3), (4, 5), (6, 7) are a little more alike,
#: and each pair holds one cell-edge client (1, 3, 5, 7).
PAIRS = np.array(
    [[4, 3, 2, 2, 0, 0, 0, 0], [3, 4, 2, 2, 0, 0, 0, 0], [2, 2, 4, 3, 0, 0, 0, 0], [2, 2, 3, 4, 0, 0, 0, 0],
     [0, 0, 0, 0, 4, 3, 2, 2], [0, 0, 0, 0, 3, 4, 2, 2], [0, 0, 0, 0, 2, 2, 4, 3], [0, 0, 0, 0, 2, 2, 3, 4]],
    dtype=float,
)
RATES = np.array([9e6, 1e6, 11e6, 2e6, 10e6, 1.5e6, 12e6, 0.5e6])


def test_rate_tiers_by_rank():
    # Ranks (slowest first): 7, 1, 5, 3 | 0, 4, 2, 6. Ties go by client id.
    np.testing.assert_array_equal(rate_tiers(RATES, 2), [1, 0, 1, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(rate_tiers([3.0, 1.0, 1.0, 2.0], 4), [3, 0, 1, 2])
    with pytest.raises(ValueError, match="streams channel_tiers must be an int >= 1, got 0"):
        rate_tiers(RATES, 0)


def test_channel_aware_streams_put_the_edge_users_together_and_send_faster():
    w = PAIRS / PAIRS.sum(axis=1, keepdims=True)
    data_only = form_streams(w, 4, seed=0)
    aware = form_streams(w, 4, seed=0, rates=RATES, channel_tiers=2)
    np.testing.assert_array_equal(data_only, [0, 0, 1, 1, 2, 2, 3, 3])  # every stream waits for an edge user
    np.testing.assert_array_equal(aware, [0, 1, 0, 1, 2, 3, 2, 3])  # {0, 2} {1, 3} {4, 6} {5, 7}
    # One model of 1e6 bits, streams sent one after the other, each at its weakest member's rate:
    # data-only 1/1 + 1/2 + 1/1.5 + 1/0.5 s; channel-aware 1/9 + 1/1 + 1/10 + 1/0.5 s.
    assert downlink_time(data_only, RATES, 1e6) == pytest.approx(1 + 1 / 2 + 1 / 1.5 + 2, rel=1e-14)
    assert downlink_time(aware, RATES, 1e6) == pytest.approx(1 / 9 + 1 + 1 / 10 + 2, rel=1e-14)
    assert downlink_time(aware, RATES, 1e6) < downlink_time(data_only, RATES, 1e6)


def test_channel_tiers_without_rates_is_data_only():
    w = PAIRS / PAIRS.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(form_streams(w, 4, seed=0, channel_tiers=2), form_streams(w, 4, seed=0))


def test_bad_formation_and_k():
    with pytest.raises(ValueError, match="streams stream_formation must be one of kmeans_rows, kmeans_offdiag, spectral, agglomerative, got 'kmedoids'"):
        form_streams(np.eye(3), 2, seed=0, formation="kmedoids")
    with pytest.raises(ValueError, match="streams k must be an int >= 1, got 0"):
        form_streams(np.eye(3), 0, seed=0)
    with pytest.raises(ValueError, match="streams min_stream_size must be an int >= 1, got 0"):
        merge_small_streams(np.eye(3), np.zeros(3, dtype=int), 0)
