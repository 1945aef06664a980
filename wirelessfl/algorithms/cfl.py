"""Clustered federated learning: recursive bi-partitioning by update similarity.

Sattler, Müller, Samek, "Clustered Federated Learning: Model-Agnostic Distributed
Multitask Optimization under Privacy Constraints", IEEE TNNLS 32(8), 2021
(arXiv:1910.01991), Algorithm 1; a baseline of user-centric-fl.txt §IV.

Every cluster runs FedAvg. After a round, a cluster whose members all reported
is split in two when FedAvg inside it has stalled at a point where its members
still disagree:

    || sum_i (n_i / n_c) dtheta_i || < eps1   and   max_i || dtheta_i || > eps2

with dtheta_i = theta_i^{t-1/2} - theta_c the member's update. The split is
Algorithm 1's bi-partition: the one minimising the largest cosine similarity
between the two parts, which is exactly the top split of single-linkage
hierarchical clustering on ``1 - similarity`` (``linkage: single``, the
default). ``linkage: complete`` is the authors' demo code
(``AgglomerativeClustering(linkage="complete")`` on the negated similarity),
which can cut through a chain of similar updates instead. Splits start after
``min_rounds_before_split`` rounds (rounds count from 1; the demo's
``c_round > 20``). Both halves start from the parent cluster's model and then
average only their own members' uploads. Every cluster is one multicast stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics.pairwise import cosine_similarity

from wirelessfl.algorithms.base import MixingAlgorithm, StepInfo, block_mixing, register
from wirelessfl.algorithms.specs.cfl import SPEC


def split_criterion(updates: Any, sizes: Any, eps1: float, eps2: float) -> tuple[bool, float, float]:
    """``(split?, mean update norm, max update norm)`` for one cluster's ``[r, P]`` updates."""
    u = _as_float64(updates)
    n = np.asarray(sizes, dtype=np.float64)
    mean_norm = float(np.linalg.norm((n / n.sum()) @ u))
    max_norm = float(np.linalg.norm(u, axis=1).max())
    return (mean_norm < eps1 and max_norm > eps2), mean_norm, max_norm


LINKAGES = ("single", "complete")


def bipartition(updates: Any, linkage: str = "single") -> np.ndarray:
    """Labels in {0, 1} splitting the rows by ``linkage`` clustering on cosine distance.

    ``single`` gives Algorithm 1's argmin over bi-partitions of the largest
    cross-part similarity (the top split of single linkage maximises the
    smallest distance between the parts); ``complete`` is the authors' demo.
    Label 0 is the part holding the first row.
    """
    if linkage not in LINKAGES:
        raise ValueError(_linkage_message(linkage))
    u = _as_float64(updates)
    if u.shape[0] < 2:
        raise ValueError(f"bipartition needs at least 2 updates, got {u.shape[0]}")
    distance = 1.0 - cosine_similarity(u)
    np.fill_diagonal(distance, 0.0)
    labels = AgglomerativeClustering(n_clusters=2, metric="precomputed", linkage=linkage).fit_predict(
        np.maximum(distance, 0.0)
    )
    return (labels != labels[0]).astype(np.int64)


def _linkage_message(linkage: Any) -> str:
    return f"cfl linkage must be 'single' (Sattler et al., Algorithm 1) or 'complete' (the authors' demo code), got {linkage!r}"


def _as_float64(values: Any) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(values, dtype=np.float64)


@register
class ClusteredFL(MixingAlgorithm):
    """FedAvg per cluster with Sattler's split rule; see the module docstring."""

    spec = SPEC

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        start = self.params_of(members)  # the participants' rows alone, not every client's
        trained, loss = self.local_training(round, members)
        updates = {int(i): trained[r] - start[r] for r, i in enumerate(members)}
        uploads = {int(i): trained[r] for r, i in enumerate(members) if int(i) in arrived}
        with self.ctx.engine.phase("cfl split test"):
            labels, diagnostics = self.split_clusters(round, updates, arrived)
        parents = self.assignment.copy()
        self.mixing, self.assignment = block_mixing(labels, self.ctx.sizes())
        parent_of = np.zeros(int(self.assignment.max()) + 1, dtype=np.int64)
        parent_of[self.assignment] = parents
        self.models = self.models[torch.as_tensor(parent_of, device=self.models.device)]
        self.models = self.aggregate(uploads)
        extra = {"clusters": int(self.models.shape[0]), "splits": diagnostics}
        if any(split["split"] for split in diagnostics):
            extra["assignment"] = self.assignment.tolist()  # the new partition, so reports can compare it with groups
            extra["cluster_sizes"] = sorted(np.bincount(self.assignment).tolist(), reverse=True)
        return StepInfo(train_loss=loss, aggregated=len(uploads), extra=extra)

    def split_clusters(
        self, round: int, updates: dict[int, torch.Tensor], arrived: frozenset[int]
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """New cluster labels after checking every cluster's split criterion.

        Nothing is tested until ``round > min_rounds_before_split`` (the demo's
        ``c_round > 20``, both counting rounds from 1).
        """
        labels = self.assignment.copy()
        next_label = int(labels.max()) + 1
        diagnostics: list[dict[str, Any]] = []
        if round <= self.params.min_rounds_before_split:
            return labels, diagnostics
        sizes = self.ctx.sizes()
        for cluster in np.unique(self.assignment):
            idx = np.flatnonzero(self.assignment == cluster)
            reported = all(int(i) in updates and int(i) in arrived for i in idx)
            if len(idx) < self.params.min_cluster_size or not reported:
                continue
            stacked = torch.stack([updates[int(i)] for i in idx])
            split, mean_norm, max_norm = split_criterion(stacked, sizes[idx], self.params.eps1, self.params.eps2)
            record = {"cluster": int(cluster), "mean_norm": mean_norm, "max_norm": max_norm, "split": split}
            if split:
                part = bipartition(stacked, self.params.linkage)
                labels[idx[part == 1]] = next_label
                next_label += 1
                record["members"] = [idx[part == 0].tolist(), idx[part == 1].tolist()]
            diagnostics.append(record)
        return labels, diagnostics
