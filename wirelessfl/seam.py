"""The one seam between the network model and the learning side.

Only these frozen, torch-free and simpy-free dataclasses cross it:

* ``CommPlan`` -- what an algorithm sends in one round (downlink streams,
  per-client uplink payloads, per-client relative local work);
* ``RoundTiming`` -- when each client received, finished computing and finished
  uploading, who made the deadline, and when the round ended (in physical mode
  with, per downlink stream, its ``StreamDelivery``: rate and repair traffic).

Payloads are in *model units*: 1.0 is one full model (``model_params``
parameters). Times in ``RoundTiming`` are measured from the start of the round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


def _frozen_mapping(values: Mapping[int, float]) -> Mapping[int, float]:
    return MappingProxyType({int(k): float(v) for k, v in values.items()})


@dataclass(frozen=True)
class Stream:
    """One downlink transmission: ``payload`` model units to ``receivers``.

    One receiver is a unicast, a group is a multicast, everybody is a broadcast.
    """

    payload: float
    receivers: frozenset[int]
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "receivers", frozenset(int(r) for r in self.receivers))
        if not self.receivers:
            raise ValueError("stream.receivers must name at least one client, got an empty set")
        if not (self.payload > 0 and math.isfinite(self.payload)):
            raise ValueError(f"stream.payload must be a positive finite number of model units, got {self.payload}")


@dataclass(frozen=True)
class CommPlan:
    """What one round sends.

    ``work`` names the participants (client -> relative local work, 1.0 = the
    scenario's local epochs); ``uplink`` gives each participant's upload in model
    units (0 = nothing to upload, e.g. Local learning). Every stream receiver
    and every uplink key must be a participant.
    """

    streams: tuple[Stream, ...]
    uplink: Mapping[int, float]
    work: Mapping[int, float]
    model_params: int = 0
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", tuple(self.streams))
        object.__setattr__(self, "uplink", _frozen_mapping(self.uplink))
        object.__setattr__(self, "work", _frozen_mapping(self.work))
        participants = set(self.work)
        for client, payload in self.uplink.items():
            if client not in participants:
                raise ValueError(f"plan.uplink names client {client}, which is not a participant (a key of plan.work)")
            if not (payload >= 0 and math.isfinite(payload)):
                raise ValueError(f"plan.uplink[{client}] must be a finite payload >= 0, got {payload}")
        for client, work in self.work.items():
            if not (work >= 0 and math.isfinite(work)):
                raise ValueError(f"plan.work[{client}] must be a finite relative work >= 0, got {work}")
        for stream in self.streams:
            outside = stream.receivers - participants
            if outside:
                raise ValueError(
                    f"stream {stream.label or ''!s} sends to clients {sorted(outside)}, which are not participants (keys of plan.work)"
                )
        if self.model_params < 0:
            raise ValueError(f"plan.model_params must be >= 0, got {self.model_params}")

    def __reduce__(self):
        return (CommPlan, (self.streams, dict(self.uplink), dict(self.work), self.model_params, self.label))

    @property
    def participants(self) -> frozenset[int]:
        return frozenset(self.work)

    @property
    def downlink_payload(self) -> float:
        """Model units the base station transmits (a multicast counts once)."""
        return float(sum(s.payload for s in self.streams))

    @property
    def uplink_payload(self) -> float:
        return float(sum(self.uplink.values()))

    @classmethod
    def broadcast(
        cls, clients: Iterable[int], payload: float = 1.0, uplink: float = 1.0, model_params: int = 0, label: str = ""
    ) -> CommPlan:
        """One stream to every participant, everybody uploads ``uplink``."""
        members = frozenset(clients)
        return cls(
            streams=(Stream(payload, members, "broadcast"),),
            uplink={c: uplink for c in members},
            work={c: 1.0 for c in members},
            model_params=model_params,
            label=label,
        )


@dataclass(frozen=True)
class StreamDelivery:
    """How one downlink stream went over the air (physical mode): what the link report shows per stream.

    ``seconds``: the multicast and its unicast repairs; ``rate_bps``: the multicast's effective rate,
    bits / multicast seconds (0 in outage); ``repair_bits``: the bits sent again by unicast to the
    ``repaired`` receivers the multicast's rate left behind (``coverage`` policy; 0 under ``worst_user``).
    """

    label: str
    receivers: int
    bits: float
    seconds: float
    rate_bps: float
    repair_bits: float = 0.0
    repaired: int = 0


@dataclass(frozen=True)
class RoundTiming:
    """When things happened in one round, measured from the round's start."""

    t_received: Mapping[int, float]
    t_computed: Mapping[int, float]
    t_uploaded: Mapping[int, float]
    arrived: frozenset[int]
    t_end: float
    events: tuple[tuple[float, str], ...] = field(default=(), compare=False)
    time_unit: str = "T_dl"
    deliveries: tuple[StreamDelivery, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "deliveries", tuple(self.deliveries))
        object.__setattr__(self, "t_received", _frozen_mapping(self.t_received))
        object.__setattr__(self, "t_computed", _frozen_mapping(self.t_computed))
        object.__setattr__(self, "t_uploaded", _frozen_mapping(self.t_uploaded))
        object.__setattr__(self, "arrived", frozenset(self.arrived))

    def __reduce__(self):
        fields = (dict(self.t_received), dict(self.t_computed), dict(self.t_uploaded), self.arrived, self.t_end)
        return (RoundTiming, (*fields, self.events, self.time_unit, self.deliveries))
