"""User-centric federated learning with k personalized downlink streams.

Mestoukirdi, Zecchin, Gesbert, Li, Gresset, "User-Centric Federated Learning",
IEEE Globecom Workshops 2021 (user-centric-fl.txt), eq. 5-7 and §III-B; journal
version: "User-Centric Federated Learning: Trading off Wireless Resources for
Personalization", IEEE TMLCN 2023 (arXiv:2304.12930).

A special round estimates collaboration weights: the server broadcasts a common
model theta_hat, client i uploads its full local gradient g_i at theta_hat and
the gradient variance sigma_i^2 over K local batches of n_k samples (eq. 7). The
server sets (eq. 6)

    w_ij  proportional to  (n_j / n_i) exp(-||g_i - g_j||^2 / (2 sigma_i sigma_j))

and from then on client i's model is the user-centric aggregate
``sum_j w_ij theta_j`` of the uploads (eq. 5). To bound the downlink cost the
rows w_i are clustered by k-means into k groups; group c receives the model
mixed with the centroid row (one multicast stream per group). ``streams: auto``
picks k by the silhouette score (§III-B, [16]). ``stream_formation`` names
the clustering (k-means on the rows is the default; alternatives, a minimum
stream size and channel-aware rate tiers are in ``streams.py``).

Right after an estimation round every stream model is still theta_hat, which
every participant of that round has just received: the next round sends the
model only to participants that missed the estimation broadcast (one
multicast), not k streams. A client whose gradient did not arrive (a deadline,
or partial participation) gets the FedAvg row over the clients that did, and its
own column is 0: its uploads enter no stream until the next estimation round, so
with ``recompute_every: 0`` it never contributes again (re-estimating it alone
would need every other client's gradient at theta_hat kept on the server).

Wireless levers (docs/levers.md): ``scheduling`` picks who trains and uploads
in the model rounds; the weight-estimation round asks every available client,
because a client whose gradient is missing never enters a stream (above), so a
k-of-N schedule there would leave N - k clients out of collaboration for good.
``compression`` compresses the model uploads (the update theta_j - the stream
model j received), as for FedAvg; the estimation round's gradients are sent as
they are (compressing them would change the weights of eq. 6, a different lever).

Knobs beyond the workshop paper (defaults keep the paper's reading; see
docs/research/ucfl-investigation.md): ``warmup_rounds`` FedAvg rounds before theta_hat is
taken, ``recompute_every`` to re-estimate the weights, ``temperature`` scaling
the exponent, ``sigma_batch_size``/``sigma_batches`` (the authors' code uses
n_k = n_i / 10 and K = 10), ``gradient_layers: body`` to leave the classifier
layer out of Delta and sigma^2.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp

from wirelessfl.algorithms import streams as formations
from wirelessfl.algorithms.base import Context, MixingAlgorithm, StepInfo, register, torch_generator
from wirelessfl.algorithms.spec import ParamError
from wirelessfl.algorithms.specs.ucfl import SPEC
from wirelessfl.seam import CommPlan, Stream


def _as_float64(values: Any) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(values, dtype=np.float64)


def collaboration_weights(
    grads: Any, sigma2: Any, sizes: Any, temperature: float = 1.0
) -> np.ndarray:
    """Eq. 6: ``W[i, j]`` = how much client i relies on client j's model.

    ``grads`` ``[m, P]`` full local gradients at theta_hat, ``sigma2`` ``[m]``
    gradient variances (eq. 7), ``sizes`` ``[m]`` local dataset sizes. Computed
    in float64 as a row softmax of ``log n_j - Delta_ij / (2 sigma_i sigma_j T)``
    (the ``1/n_i`` factor cancels in the normalisation), so huge exponents do
    not underflow to 0/0.
    """
    g = _as_float64(grads)
    s2 = _as_float64(sigma2)
    n = _as_float64(sizes)
    if g.ndim != 2:
        raise ValueError(f"collaboration_weights grads must be a [m, P] matrix, got shape {g.shape}")
    m = g.shape[0]
    if s2.shape != (m,) or n.shape != (m,):
        raise ValueError(
            f"collaboration_weights sigma2 and sizes must have shape ({m},), got {s2.shape} and {n.shape}"
        )
    if not np.all(np.isfinite(g)):
        raise ValueError("collaboration_weights grads must be finite")
    if not np.all((s2 > 0) & np.isfinite(s2)):
        raise ValueError(f"collaboration_weights sigma2 must be positive and finite, got {s2.tolist()}")
    if not np.all((n > 0) & np.isfinite(n)):
        raise ValueError(f"collaboration_weights sizes must be positive and finite, got {n.tolist()}")
    if not (temperature > 0 and np.isfinite(temperature)):
        raise ValueError(f"ucfl temperature must be a positive finite number, got {temperature}")
    delta = squared_distances(g)
    sigma = np.sqrt(s2)
    logits = np.log(n)[None, :] - delta / (2.0 * temperature * np.outer(sigma, sigma))
    return np.exp(logits - logsumexp(logits, axis=1, keepdims=True))


def squared_distances(g: np.ndarray) -> np.ndarray:
    """``Delta[i, j] = ||g_i - g_j||^2`` (float64, exact zeros on the diagonal)."""
    sq = np.einsum("ij,ij->i", g, g)
    delta = sq[:, None] + sq[None, :] - 2.0 * (g @ g.T)
    np.fill_diagonal(delta, 0.0)
    return np.maximum(delta, 0.0)


def stream_mixing(weights: Any, k: int, seed: int, formation: str = "kmeans_rows", **options: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(mixing [k, m], assignment [m])`` by ``formation`` (default: k-means on the rows of W, §III-B).

    Stream c's mixing row is the centroid of its members' rows, renormalised to
    sum 1. Clusters are numbered in order of first appearance. ``k >= m`` keeps
    every row as it is (per-user aggregation, eq. 5, exactly; rows of eq. 6
    already sum to 1). ``options``: see ``streams.stream_mixing``.
    """
    w = _as_float64(weights)
    m = w.shape[0]
    if w.ndim != 2 or w.shape[1] != m:
        raise ValueError(f"stream_mixing weights must be a square [m, m] matrix, got shape {w.shape}")
    if not _positive_int(k):
        raise ValueError(f"ucfl streams must be a positive int, 'm', 'all' or 'auto', got {k!r}")
    return formations.stream_mixing(w, int(k), seed, formation, **options)


def choose_streams_by_silhouette(
    weights: Any, k_range: Iterable[int], seed: int, formation: str = "kmeans_rows", min_stream_size: int = 1
) -> tuple[int, dict[int, float]]:
    """The k in ``k_range`` whose clustering by ``formation`` has the best silhouette.

    Silhouette is defined for ``2 <= k <= m - 1``; ties go to the smaller k.
    """
    return formations.choose_streams_by_silhouette(
        _as_float64(weights), k_range, seed, formation, min_stream_size=min_stream_size
    )


@register
class UserCentricFL(MixingAlgorithm):
    """Eq. 5-7 with k k-means streams; see the module docstring."""

    spec = SPEC

    @classmethod
    def uses_channel(cls, params: Mapping[str, Any]) -> bool:
        """Channel-aware streams (``channel_tiers`` > 1) need the profile's downlink rates."""
        return cls.spec.parse(params).channel_tiers > 1

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        self._validate()
        self.weights: np.ndarray | None = None
        self.sigma2: np.ndarray | None = None
        self.silhouette: dict[int, float] = {}
        #: Clients already holding every stream model (all still theta_hat), or None.
        self.holding: frozenset[int] | None = None

    # -- configuration --------------------------------------------------------
    def _validate(self) -> None:
        """What the declaration cannot check: ``auto_range`` within the clients."""
        m = self.ctx.num_clients
        if self.params.streams == "auto":
            low, high = self.params.auto_range
            if high > m - 1:
                raise ParamError(
                    f"ucfl: auto_range must be (low, high) with 2 <= low <= high <= {m - 1} (m = {m} clients), got {self.params.auto_range!r}",
                    self.name, "auto_range",
                )

    def is_estimation_round(self, round: int) -> bool:
        """The weight-estimation rounds (rounds count from 1): right after the
        ``warmup_rounds`` FedAvg rounds, then every ``recompute_every`` rounds."""
        first = self.params.warmup_rounds + 1
        every = self.params.recompute_every
        if round == first:
            return True
        return every > 0 and round > first and (round - first) % every == 0

    def sigma_batches_for(self, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-client (n_k, K) of eq. 7; K is capped so the K batches are disjoint."""
        size = self.params.sigma_batch_size
        if isinstance(size, float):
            batch = np.maximum(1, np.floor(size * sizes)).astype(np.int64)
        else:
            batch = np.minimum(int(size), sizes.astype(np.int64))
        count = np.minimum(int(self.params.sigma_batches), sizes.astype(np.int64) // batch)
        return batch, np.maximum(count, 1)

    def participants(self, round: int) -> np.ndarray:
        """The scheduled clients in a model round; every available client in a weight-estimation round, unless
        ``estimation_clients`` is ``scheduled``."""
        if self.is_estimation_round(round) and self.params.estimation_clients == "available":
            return self.available_clients(round)
        return super().participants(round)

    # -- plan -----------------------------------------------------------------
    def plan(self, round: int) -> CommPlan:
        if not self.is_estimation_round(round):
            plan = super().plan(round)
            if self.holding is None:
                return plan
            missing = frozenset(plan.participants - self.holding)
            streams = (Stream(1.0, missing, "theta_hat"),) if missing else ()
            return replace(plan, streams=streams)
        members = self.participants(round)
        sizes = self.ctx.sizes()
        batch, count = self.sigma_batches_for(sizes)
        epochs = float(max(self.ctx.train.epochs, 1))
        work = {int(i): float((sizes[i] + batch[i] * count[i]) / (sizes[i] * epochs)) for i in members}
        return CommPlan(
            streams=(Stream(1.0, frozenset(int(i) for i in members), "theta_hat"),),
            uplink={int(i): 1.0 for i in members},
            work=work,
            model_params=self.ctx.arch.param_count,
            label=f"{self.name}-weights",
        )

    # -- step -----------------------------------------------------------------
    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        if not self.is_estimation_round(round):
            before = self.models
            info = super().step(round, arrived)
            if self.holding is not None:
                unchanged = self.models is before or torch.equal(self.models, before)
                self.holding = self.holding | frozenset(int(i) for i in self.participants(round)) if unchanged else None
            return info
        return self.estimate_weights(round, arrived)

    def estimate_weights(self, round: int, arrived: frozenset[int]) -> StepInfo:
        """The special round: gradients and sigma^2 at theta_hat -> W -> streams."""
        members = [int(i) for i in self.participants(round) if int(i) in arrived]
        m = self.ctx.num_clients
        sizes = self.ctx.sizes()
        theta_hat, common = self.population_model()
        if len(members) < 2:
            return StepInfo(train_loss=float("nan"), aggregated=len(members), extra={"estimated": False})
        with self.ctx.engine.phase("ucfl estimation"):
            grads, sigma2 = self.gradient_statistics(theta_hat, members, round)
        reported = np.asarray(members)
        local = collaboration_weights(grads, sigma2, sizes[reported], self.params.temperature)
        weights = np.zeros((m, m))
        weights[:, reported] = sizes[reported] / sizes[reported].sum()
        weights[np.ix_(reported, reported)] = local
        self.weights, self.sigma2 = weights, np.full(m, np.nan)
        self.sigma2[reported] = sigma2
        old_models, old_assignment = self.models, self.assignment
        mixing, assignment = self.choose_streams(weights, round)
        self.mixing = torch.as_tensor(mixing, dtype=torch.float64)
        self.assignment = assignment
        if common:
            self.models = theta_hat.expand(int(mixing.shape[0]), -1).clone()
            self.holding = frozenset(int(i) for i in self.participants(round))
        else:
            self.models = self.stream_starts(old_models, old_assignment, assignment)
            self.holding = None
        extra: dict[str, Any] = {
            "estimated": True,
            "streams": int(mixing.shape[0]),
            "self_weight_mean": float(np.mean(np.diag(local))),
            "sigma2_mean": float(np.mean(sigma2)),
        }
        if self.silhouette:
            extra["silhouette"] = dict(self.silhouette)
        extra["stream_sizes"] = formations.stream_sizes(assignment)
        extra["assignment"] = assignment.tolist()
        if self.params.channel_tiers > 1 and self.ctx.downlink_rates is None:
            extra["note"] = "channel_tiers ignored: no physical channel in this profile, data-only streams"
        return StepInfo(train_loss=float("nan"), aggregated=len(members), extra=extra)

    def population_model(self) -> tuple[torch.Tensor, bool]:
        """``(theta_hat [1, P], whether every client holds that very model)``.

        theta_hat is the size-weighted average of the clients' current models;
        before any personalization it is, exactly, the one global model (the
        initial model with ``warmup_rounds = 0``, as in the paper).
        """
        in_use = np.unique(self.assignment)
        if len(in_use) == 1 or bool((self.models[torch.as_tensor(in_use)] == self.models[int(in_use[0])]).all()):
            return self.models[int(in_use[0])][None, :].clone(), True
        sizes = torch.as_tensor(self.ctx.sizes() / self.ctx.sizes().sum(), dtype=self.models.dtype)
        return (sizes.to(self.models.device) @ self.client_params())[None, :], False

    def gradient_statistics(self, theta_hat: torch.Tensor, members: list[int], round: int) -> tuple[np.ndarray, np.ndarray]:
        """Full gradients ``[r, P]`` and eq. 7 variances ``[r]`` at theta_hat."""
        engine = self.ctx.engine
        sets = self.ctx.train_sets(members)
        start = theta_hat.expand(len(members), -1)
        keep = self.gradient_columns()
        grads = engine.full_gradient(start, sets).to(torch.float64)[:, keep]
        batch, count = self.sigma_batches_for(self.ctx.sizes()[members])
        sigma2 = np.empty(len(members))
        for n_k, k in sorted(set(zip(batch.tolist(), count.tolist()))):
            rows = [r for r in range(len(members)) if batch[r] == n_k and count[r] == k]
            generator = torch_generator(self.ctx.seed, round, "ucfl-sigma", n_k, k)
            per_batch = engine.batch_gradients(start[rows], [sets[r] for r in rows], n_k, k, generator)
            spread = per_batch.to(torch.float64)[:, :, keep] - grads[rows][:, None, :]
            sigma2[rows] = spread.pow(2).sum(dim=2).mean(dim=1).cpu().numpy()
        return grads.cpu().numpy(), sigma2

    def gradient_columns(self) -> torch.Tensor:
        """Which gradient coordinates enter Delta and sigma^2 (paper: all)."""
        mask = torch.ones(self.ctx.arch.param_count, dtype=torch.bool)
        if self.params.gradient_layers == "body":
            mask = ~self.ctx.arch.head_mask()
        return mask.to(self.ctx.device)

    def choose_streams(self, weights: np.ndarray, round: int) -> tuple[np.ndarray, np.ndarray]:
        """``(mixing, assignment)`` by ``stream_formation``; with ``channel_tiers`` T > 1 and the
        profile's rates, k // T data clusters split by rate tier (``streams: auto`` picks the data
        clusters by silhouette, then tiers multiply them)."""
        p = self.params
        streams = p.streams
        m = self.ctx.num_clients
        seed = int(self.ctx.seed) + 1000003 * int(round)
        formation, min_size = p.stream_formation, p.min_stream_size
        rates = self.ctx.downlink_rates if p.channel_tiers > 1 else None
        tiers = p.channel_tiers if rates is not None else 1
        options = {"min_stream_size": min_size, "rates": rates, "channel_tiers": tiers}
        if streams in ("m", "all"):
            return stream_mixing(weights, m, seed, formation, min_stream_size=min_size)
        if streams == "auto":
            low, high = p.auto_range
            k, self.silhouette = choose_streams_by_silhouette(weights, range(low, high + 1), seed, formation, min_size)
            return stream_mixing(weights, k * tiers, seed, formation, **options)
        return stream_mixing(weights, int(streams), seed, formation, **options)

    def stream_starts(self, old_models: torch.Tensor, old_assignment: np.ndarray, assignment: np.ndarray) -> torch.Tensor:
        """Each new stream starts at the size-weighted average of its members' current models."""
        sizes = torch.as_tensor(self.ctx.sizes(), dtype=old_models.dtype, device=old_models.device)
        current = old_models[torch.as_tensor(old_assignment, device=old_models.device)]
        count = int(assignment.max()) + 1
        starts = torch.empty((count, old_models.shape[1]), dtype=old_models.dtype, device=old_models.device)
        for c in range(count):
            idx = torch.as_tensor(np.flatnonzero(assignment == c), device=old_models.device)
            starts[c] = (sizes[idx] / sizes[idx].sum()) @ current[idx]
        return starts

    # -- state ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["weights"] = None if self.weights is None else self.weights.copy()
        state["sigma2"] = None if self.sigma2 is None else self.sigma2.copy()
        state["silhouette"] = dict(self.silhouette)
        state["holding"] = None if self.holding is None else sorted(self.holding)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.weights = None if state["weights"] is None else np.asarray(state["weights"]).copy()
        self.sigma2 = None if state["sigma2"] is None else np.asarray(state["sigma2"]).copy()
        self.silhouette = dict(state["silhouette"])
        self.holding = None if state.get("holding") is None else frozenset(state["holding"])


def _positive_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1
