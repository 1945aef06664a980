"""Client scheduling: which k of the clients available in a round are asked to train and upload.

Yang, Liu, Quek, Poor, "Scheduling Policies for Federated Learning in Wireless
Networks", IEEE Trans. Commun. 68(1), 2020: random scheduling (RS), round robin
(RR) and proportional fair (PF) of k devices among N; best channel is the
max-SINR scheduler PF is compared with; ``age`` schedules the clients whose
last upload is oldest (the age of update of Yang, Arafa, Quek, Poor, "Age-Based
Scheduling Policy for Federated Learning in Mobile Edge Networks", ICASSP 2020,
without its channel term).

``importance`` is update-aware: Amiri, Gunduz, Kulkarni, Poor, "Convergence of
Update Aware Device Scheduling for Federated Learning at the Wireless Edge",
IEEE Trans. Wireless Commun. 20(6), 2021, schedule the devices whose updates
weigh most, the channel breaking what the norm alone would choose (their
BN2-C policy weights each update's l2 norm by the device's channel). Here the
score of client i in round r is ||Δ_i||_2 · R_i(r): the norm of the last update
the base station received from i (the update as the server decompressed it)
times i's instantaneous uplink rate. Their devices all train before the base
station picks, so it knows this round's norms; here only scheduled clients
train, so the base station uses the last norm it received (stale by the
client's age). A client whose update has never arrived has no norm: such
clients go first, by rate, so that every client is heard once before norms
decide (the base station knows nothing of them that would rank them lower).

A scheduler sees only what a base station sees: the round's uplink channel
state (``seam.UplinkChannel``, which the network makes from the round's own
draws), the round each client last uploaded, and the client ids; never data.
The clients "available" in a round are the training clients, or the seeded
sample of them under ``training.participation`` < 1; with k at least as many,
every policy schedules them all (today's round, draw for draw).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wirelessfl.seam import UplinkChannel

POLICIES = ("random", "round_robin", "best_channel", "proportional_fair", "age", "importance")
#: policies that read the round's uplink channel: their training depends on the profile's channel
CHANNEL_POLICIES = frozenset({"best_channel", "proportional_fair", "importance"})


@dataclass(frozen=True)
class Scheduling:
    """``training.scheduling``: the policy and how many clients it schedules each round."""

    policy: str
    k: int

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"scheduling.policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"scheduling.k must be an integer >= 1, got {self.k!r}")

    @property
    def reads_channel(self) -> bool:
        return self.policy in CHANNEL_POLICIES

    @property
    def reads_norms(self) -> bool:
        """True when the policy ranks by the norm of each client's last received update (``importance``)."""
        return self.policy == "importance"


def top_k(clients: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` clients of highest score, ties to the lower id, sorted by id."""
    order = np.lexsort((clients, -np.asarray(scores, dtype=float)))
    return np.sort(clients[order[:k]])


def importance_order(clients: np.ndarray, norms: np.ndarray, rates: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` clients of largest ||Δ|| · R (``norms`` NaN: no update received yet; those first, by rate), ties
    to the lower id, sorted by id."""
    unknown = np.isnan(norms)
    scores = np.where(unknown, rates, np.nan_to_num(norms) * rates)
    order = np.lexsort((clients, -scores, ~unknown))
    return np.sort(clients[order[:k]])


def round_robin_group(pool: np.ndarray, k: int, round: int) -> np.ndarray:
    """Yang et al.'s RR: ``pool`` (sorted) cut into ceil(N/k) groups of k consecutive clients (the last may be
    smaller), group ``(round - 1) mod ceil(N/k)`` in round ``round`` (1-based): each client once per cycle."""
    groups = math.ceil(len(pool) / k)
    g = (round - 1) % groups
    return pool[g * k : (g + 1) * k]


class Scheduler:
    """Chooses each round's participants under one ``Scheduling``; its state is the round of each client's
    last upload that arrived (``age``) and, for ``importance``, the norm of that upload's update (NaN before the
    first), kept in the algorithm's ``state_dict`` so a resumed run schedules alike.

    ``sample(round, count, available)`` is the algorithm's seeded uniform draw (the participation draw), so
    ``random`` with k of N clients is ``participation: k/N`` exactly. ``channel(round)`` gives the round's
    uplink channel (set by the simulation for channel-aware policies)."""

    def __init__(
        self, spec: Scheduling, num_clients: int, sample: Callable[[int, int, np.ndarray], np.ndarray],
        channel: Callable[[int], UplinkChannel] | None = None,
    ) -> None:
        self.spec = spec
        self.sample = sample
        self.channel = channel
        self.last_upload = np.zeros(num_clients, dtype=np.int64)
        self.norms = np.full(num_clients, np.nan)

    def select(self, round: int, available: np.ndarray, pool: np.ndarray) -> np.ndarray:
        """The scheduled clients of ``round`` among ``available`` (sorted ids); ``pool``: every training client."""
        k, policy = self.spec.k, self.spec.policy
        if policy == "round_robin":
            return np.intersect1d(round_robin_group(pool, k, round), available)
        if k >= len(available):
            return available
        if policy == "random":
            return self.sample(round, k, available)
        if policy == "age":
            return top_k(available, round - self.last_upload[available], k)
        if self.channel is None:
            raise ValueError(f"scheduling.policy {policy} reads the uplink channel, which this run does not model (physical: unset)")
        state = self.channel(round)
        if policy == "importance":
            return importance_order(available, self.norms[available], np.asarray(state.rate_bps)[available], k)
        if policy == "best_channel":
            scores = np.asarray(state.snr)[available]
        else:  # proportional_fair: instantaneous over long-run (ergodic) rate
            scores = np.asarray(state.rate_bps)[available] / np.asarray(state.mean_rate_bps)[available]
        return top_k(available, scores, k)

    def record(self, round: int, arrived: frozenset[int], norms: Mapping[int, float] | None = None) -> None:
        """The uploads of ``round`` that arrived (what the base station received) and, for ``importance``, the
        l2 norm of each one's update."""
        if arrived:
            self.last_upload[np.fromiter(arrived, dtype=np.int64)] = round
        for client, norm in (norms or {}).items():
            if client in arrived:
                self.norms[client] = float(norm)

    def state_dict(self) -> dict[str, Any]:
        state = {"last_upload": self.last_upload.copy()}
        if self.spec.reads_norms:
            state["norms"] = self.norms.copy()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.last_upload = np.asarray(state["last_upload"], dtype=np.int64).copy()
        if "norms" in state:
            self.norms = np.asarray(state["norms"], dtype=np.float64).copy()
