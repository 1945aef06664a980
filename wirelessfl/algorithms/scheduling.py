"""Client scheduling: which k of the clients available in a round are asked to train and upload.

Yang, Liu, Quek, Poor, "Scheduling Policies for Federated Learning in Wireless
Networks", IEEE Trans. Commun. 68(1), 2020: random scheduling (RS), round robin
(RR) and proportional fair (PF) of k devices among N; best channel is the
max-SINR scheduler PF is compared with; ``age`` schedules the clients whose
last upload is oldest (the age of update of Yang, Arafa, Quek, Poor, "Age-Based
Scheduling Policy for Federated Learning in Mobile Edge Networks", ICASSP 2020,
without its channel term).

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

POLICIES = ("random", "round_robin", "best_channel", "proportional_fair", "age")
#: policies that read the round's uplink channel: their training depends on the profile's channel
CHANNEL_POLICIES = frozenset({"best_channel", "proportional_fair"})


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


def top_k(clients: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` clients of highest score, ties to the lower id, sorted by id."""
    order = np.lexsort((clients, -np.asarray(scores, dtype=float)))
    return np.sort(clients[order[:k]])


def round_robin_group(pool: np.ndarray, k: int, round: int) -> np.ndarray:
    """Yang et al.'s RR: ``pool`` (sorted) cut into ceil(N/k) groups of k consecutive clients (the last may be
    smaller), group ``(round - 1) mod ceil(N/k)`` in round ``round`` (1-based): each client once per cycle."""
    groups = math.ceil(len(pool) / k)
    g = (round - 1) % groups
    return pool[g * k : (g + 1) * k]


class Scheduler:
    """Chooses each round's participants under one ``Scheduling``; its state is the round of each client's
    last upload that arrived (``age``), kept in the algorithm's ``state_dict`` so a resumed run schedules alike.

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
        if policy == "best_channel":
            scores = np.asarray(state.snr)[available]
        else:  # proportional_fair: instantaneous over long-run (ergodic) rate
            scores = np.asarray(state.rate_bps)[available] / np.asarray(state.mean_rate_bps)[available]
        return top_k(available, scores, k)

    def record(self, round: int, arrived: frozenset[int]) -> None:
        """The uploads of ``round`` that arrived (what the base station received)."""
        if arrived:
            self.last_upload[np.fromiter(arrived, dtype=np.int64)] = round

    def state_dict(self) -> dict[str, Any]:
        return {"last_upload": self.last_upload.copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.last_upload = np.asarray(state["last_upload"], dtype=np.int64).copy()
