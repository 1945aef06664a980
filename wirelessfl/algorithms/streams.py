"""Stream formation: which clients share one personalized downlink multicast.

The user-centric algorithm (Mestoukirdi et al., user-centric-fl.txt §III-B)
bounds its downlink cost by clustering the rows of the collaboration matrix
``W`` (row i: client i's mixing weights, eq. 6) into k groups; group c receives
the model mixed with the mean of its members' rows (one multicast per group).
The paper names k-means on the rows; this module makes that a named, pluggable
choice for any mixing algorithm (``stream_mixing(W, k, seed, formation)``):

``kmeans_rows`` (default, the paper's reading)
    k-means on the rows of W.
``kmeans_offdiag``
    k-means on the *peer rows*: W with each client's self-weight replaced by
    its largest weight on a peer, rows renormalised. Eq. 6 gives a client whose
    gradient is far from everybody's a self-weight near 1, so its row is far
    from every other row and k-means spends a centroid on it: on EMNIST
    scenario 2 k = 4 gave streams of 97 + 1 + 1 + 1 users
    (docs/research/reproduction.md). The peer rows keep only whom a client relies on;
    the capped diagonal (rather than 0) keeps two members of a group of two
    identical (with 0 their rows would be orthogonal).
``spectral``
    spectral clustering (normalised cut) of the symmetrised peer rows
    ``(P + P^T) / 2`` as an affinity: a group is a set of clients that rely on
    each other, not a set of rows close to a centroid, so groups of unequal
    size or non-spherical spread are found.
``agglomerative``
    average linkage on the cosine distance ``1 - cos(P_i, P_j)`` of the peer
    rows: deterministic (no seed), and the cosine ignores how concentrated a
    row is, only where its mass goes.

``streams: auto`` scores each k by the silhouette on the representation the
method clusters (W or the peer rows, Euclidean, for the k-means methods; the
cosine distance of the affinity or peer rows for spectral / agglomerative).
``min_stream_size`` merges, smallest first, every stream smaller than it into
the stream its members put the most weight on.

Channel-aware grouping (``rates`` with ``channel_tiers`` T > 1), beyond the
paper: with a physical channel a multicast runs at its weakest receiver's rate
(wirelessfl/network/model.py), so one cell-edge user in a stream makes the
whole stream slow. With k streams, k // T are data clusters and each is split
by rate tier (T tiers of equal count over all clients, by nominal downlink
rate), so edge users share streams with edge users and fast users are not held
back. At equal k this trades data resolution (k // T instead of k groups) for
downlink time: the extra streams go to channel quality instead of splitting
data groups further. Tier-split streams of one data cluster keep nearly the
same mixing row (means of rows of the same cluster), so they carry nearly the
same model.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from sklearn.cluster import AgglomerativeClustering, KMeans, SpectralClustering
from sklearn.metrics import silhouette_score
from sklearn.metrics.pairwise import cosine_distances

KMEANS_RESTARTS = 10

#: name -> (cluster(W, k, seed) -> labels, silhouette space(W) -> (X, metric))
FORMATIONS: dict[str, tuple[Callable[[np.ndarray, int, int], np.ndarray], Callable[[np.ndarray], tuple[np.ndarray, str]]]] = {}


def formation(name: str, space: Callable[[np.ndarray], tuple[np.ndarray, str]]):
    """Register ``cluster(W, k, seed) -> labels`` (called with 2 <= k < m) under ``name``."""

    def wrap(cluster: Callable[[np.ndarray, int, int], np.ndarray]):
        if name in FORMATIONS:
            raise ValueError(f"stream formation {name!r} is already registered")
        FORMATIONS[name] = (cluster, space)
        return cluster

    return wrap


def peer_rows(weights: np.ndarray) -> np.ndarray:
    """W with each diagonal entry replaced by the row's largest off-diagonal entry, rows renormalised.

    A row with no weight on any peer stays the client alone (``e_i``).
    """
    w = _weights(weights, square=True)
    p = w.copy()
    np.fill_diagonal(p, 0.0)
    cap = p.max(axis=1) if p.shape[1] > 1 else np.zeros(p.shape[0])
    np.fill_diagonal(p, cap)
    total = p.sum(axis=1)
    alone = total <= 0
    p[alone] = np.eye(p.shape[0])[alone]
    total[alone] = 1.0
    return p / total[:, None]


def affinity(weights: np.ndarray) -> np.ndarray:
    """Symmetrised peer rows: how much i and j rely on each other."""
    p = peer_rows(weights)
    return 0.5 * (p + p.T)


def _rows_space(w: np.ndarray) -> tuple[np.ndarray, str]:
    return w, "euclidean"


def _peer_space(w: np.ndarray) -> tuple[np.ndarray, str]:
    return peer_rows(w), "euclidean"


def _affinity_cosine_space(w: np.ndarray) -> tuple[np.ndarray, str]:
    return _cosine(affinity(w)), "precomputed"


def _peer_cosine_space(w: np.ndarray) -> tuple[np.ndarray, str]:
    return _cosine(peer_rows(w)), "precomputed"


def _cosine(x: np.ndarray) -> np.ndarray:
    distance = np.maximum(cosine_distances(x), 0.0)
    np.fill_diagonal(distance, 0.0)
    return distance


def _sklearn_seed(seed: int) -> int:
    return int(seed) % (2**32)


@formation("kmeans_rows", _rows_space)
def kmeans_rows(w: np.ndarray, k: int, seed: int) -> np.ndarray:
    return KMeans(n_clusters=int(k), n_init=KMEANS_RESTARTS, random_state=_sklearn_seed(seed)).fit_predict(w)


@formation("kmeans_offdiag", _peer_space)
def kmeans_offdiag(w: np.ndarray, k: int, seed: int) -> np.ndarray:
    return kmeans_rows(peer_rows(w), k, seed)


@formation("spectral", _affinity_cosine_space)
def spectral(w: np.ndarray, k: int, seed: int) -> np.ndarray:
    with warnings.catch_warnings():
        # Hard blocks (no weight across groups) make a disconnected graph: exactly the case it separates.
        warnings.filterwarnings("ignore", message="Graph is not fully connected")
        model = SpectralClustering(
            n_clusters=int(k), affinity="precomputed", n_init=KMEANS_RESTARTS, random_state=_sklearn_seed(seed)
        )
        return model.fit_predict(affinity(w))


@formation("agglomerative", _peer_cosine_space)
def agglomerative(w: np.ndarray, k: int, seed: int) -> np.ndarray:
    del seed  # deterministic
    return AgglomerativeClustering(n_clusters=int(k), metric="precomputed", linkage="average").fit_predict(
        _cosine(peer_rows(w))
    )


def check_formation(value: Any, owner: str = "streams") -> str:
    if value not in FORMATIONS:
        raise ValueError(f"{owner} stream_formation must be one of {', '.join(FORMATIONS)}, got {value!r}")
    return value


def _positive_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def _weights(weights: Any, square: bool = False) -> np.ndarray:
    """W as float64; ``kmeans_rows`` clusters any ``[m, d]`` rows, everything else needs ``[m, m]``."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or (square and w.shape[0] != w.shape[1]):
        raise ValueError(f"stream weights must be a square [m, m] matrix, got shape {w.shape}")
    return w


def renumber(labels: np.ndarray) -> np.ndarray:
    """Labels ``0..c-1`` in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inverse].astype(np.int64)


def data_clusters(weights: Any, k: int, seed: int, formation: str = "kmeans_rows") -> np.ndarray:
    """``formation``'s k clusters of the clients (renumbered); k = 1 is one cluster, k >= m one per client."""
    w = _weights(weights)
    m = w.shape[0]
    if not _positive_int(k):
        raise ValueError(f"streams k must be an int >= 1, got {k!r}")
    check_formation(formation)
    if k == 1:
        return np.zeros(m, dtype=np.int64)
    if k >= m:
        return np.arange(m, dtype=np.int64)
    return renumber(FORMATIONS[formation][0](w, int(k), int(seed)))


def merge_small_streams(weights: Any, assignment: np.ndarray, min_size: int) -> np.ndarray:
    """Merge streams smaller than ``min_size``, smallest first (ties: lowest label), into the
    stream on whose members the small stream's members put the most weight (ties: lowest label)."""
    w = _weights(weights, square=True)
    if not _positive_int(min_size):
        raise ValueError(f"streams min_stream_size must be an int >= 1, got {min_size!r}")
    labels = renumber(np.asarray(assignment))
    while True:
        sizes = np.bincount(labels)
        if len(sizes) == 1 or sizes.min() >= min_size:
            return labels
        small = int(np.argmin(sizes))
        members = labels == small
        reliance = np.array([w[np.ix_(members, labels == c)].sum() if c != small else -np.inf for c in range(len(sizes))])
        target = int(np.argmax(reliance))
        labels = renumber(np.where(members, target, labels))


def rate_tiers(rates: Any, tiers: int) -> np.ndarray:
    """Tier of each client, 0 = slowest: ``floor(T * rank / m)`` over the ranks of ``rates`` (ties by client id).
    A rate of 0 (a user out of coverage even in good fading blocks) ranks slowest."""
    r = np.asarray(rates, dtype=np.float64)
    if r.ndim != 1 or not np.all(np.isfinite(r) & (r >= 0)):
        raise ValueError(f"streams rates must be a vector of finite rates >= 0 (0: out of coverage), got {r.tolist()}")
    if not _positive_int(tiers):
        raise ValueError(f"streams channel_tiers must be an int >= 1, got {tiers!r}")
    rank = np.empty(len(r), dtype=np.int64)
    rank[np.argsort(r, kind="stable")] = np.arange(len(r))
    return (int(tiers) * rank) // len(r)


def form_streams(
    weights: Any,
    k: int,
    seed: int,
    formation: str = "kmeans_rows",
    *,
    min_stream_size: int = 1,
    rates: Any = None,
    channel_tiers: int = 1,
) -> np.ndarray:
    """The stream of each client (at most k streams); see the module docstring.

    With ``rates`` and ``channel_tiers`` T > 1: ``max(1, k // T)`` data clusters,
    small ones merged (``min_stream_size``), then each split by rate tier.
    """
    w = _weights(weights)
    tiered = rates is not None and channel_tiers != 1
    if tiered and not _positive_int(channel_tiers):
        raise ValueError(f"streams channel_tiers must be an int >= 1, got {channel_tiers!r}")
    data_k = max(1, int(k) // int(channel_tiers)) if tiered and _positive_int(k) else k
    labels = data_clusters(w, data_k, seed, formation)
    if min_stream_size != 1:
        labels = merge_small_streams(w, labels, min_stream_size)
    if tiered:
        tier = rate_tiers(rates, channel_tiers)
        if len(tier) != w.shape[0]:
            raise ValueError(f"streams rates must have one entry per client ({w.shape[0]}), got {len(tier)}")
        labels = renumber(labels * int(channel_tiers) + tier)
    return labels


def stream_mixing(
    weights: Any,
    k: int,
    seed: int,
    formation: str = "kmeans_rows",
    *,
    min_stream_size: int = 1,
    rates: Any = None,
    channel_tiers: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """``(mixing [c, m], assignment [m])`` for any mixing algorithm.

    Stream c's mixing row is the mean of its members' rows of W, renormalised
    to sum 1. When every client is its own stream the mixing is W itself
    (per-user aggregation, eq. 5, exactly).
    """
    w = _weights(weights)
    assignment = form_streams(
        w, k, seed, formation, min_stream_size=min_stream_size, rates=rates, channel_tiers=channel_tiers
    )
    if np.array_equal(assignment, np.arange(w.shape[0])):
        return w.copy(), assignment
    count = int(assignment.max()) + 1
    mixing = np.stack([w[assignment == c].mean(axis=0) for c in range(count)])
    return mixing / mixing.sum(axis=1, keepdims=True), assignment


def choose_streams_by_silhouette(
    weights: Any, k_range: Iterable[int], seed: int, formation: str = "kmeans_rows", *, min_stream_size: int = 1
) -> tuple[int, dict[int, float]]:
    """The k in ``k_range`` whose clustering by ``formation`` has the best silhouette.

    The silhouette is taken on the representation the method clusters, after
    ``min_stream_size`` merges; a clustering with a single stream scores -1.
    Silhouette is defined for ``2 <= k <= m - 1``; ties go to the smaller k.
    """
    w = _weights(weights)
    m = w.shape[0]
    candidates = sorted({int(k) for k in k_range})
    if not candidates or candidates[0] < 2 or candidates[-1] > m - 1:
        raise ValueError(f"streams auto_range must lie within [2, {m - 1}] (m = {m} clients), got {candidates}")
    check_formation(formation)
    space, metric = FORMATIONS[formation][1](w)
    scores: dict[int, float] = {}
    for k in candidates:
        labels = data_clusters(w, k, seed, formation)
        if min_stream_size != 1:
            labels = merge_small_streams(w, labels, min_stream_size)
        distinct = len(np.unique(labels))
        scores[k] = float(silhouette_score(space, labels, metric=metric)) if 2 <= distinct <= m - 1 else -1.0
    best = max(candidates, key=lambda k: (scores[k], -k))
    return best, scores


def downlink_time(assignment: Any, rates: Any, payload_bits: float = 1.0) -> float:
    """Sequential multicast time: ``sum_c payload_bits / min_{i in c} rate_i``."""
    labels = np.asarray(assignment)
    r = np.asarray(rates, dtype=np.float64)
    return float(sum(payload_bits / r[labels == c].min() for c in np.unique(labels)))


def stream_sizes(assignment: Any) -> list[int]:
    """Stream sizes, largest first (for diagnostics)."""
    return sorted((int(n) for n in np.bincount(np.asarray(assignment)) if n > 0), reverse=True)
