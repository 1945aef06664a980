"""The one seam between the network model and the learning side.

Only these frozen, torch-free and simpy-free dataclasses cross it:

* ``CommPlan`` -- what an algorithm sends in one round (downlink streams,
  per-client uplink payloads, per-client relative local work);
* ``RoundTiming`` -- when each client received, finished computing and finished
  uploading, who made the deadline, and when the round ended (in physical mode
  with, per downlink stream, its ``StreamDelivery``: rate and repair traffic);
  and, for device energy and the per-client timeline, when each reception,
  computation and upload started and how long each upload held the air.

Payloads are in *model units*: 1.0 is one full model (``model_params``
parameters). Times in ``RoundTiming`` are measured from the start of the round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


def _frozen_mapping(values: Mapping[int, float]) -> Mapping[int, float]:
    """A read-only copy with int keys and float values; a ``MappingProxyType`` is taken as already made so
    (``frozen`` makes one), which keeps timing 10,000-client rounds cheap."""
    if type(values) is MappingProxyType:
        return values
    return MappingProxyType({int(k): float(v) for k, v in values.items()})


def frozen(keys: list[int], values: list) -> Mapping:
    """A read-only mapping from Python ints to Python values (``.tolist()`` output), made without a copy."""
    return MappingProxyType(dict(zip(keys, values)))


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


def _frozen_intervals(values: Mapping[int, Iterable[Iterable[float]]]) -> Mapping[int, tuple[tuple[float, float], ...]]:
    """Tuples of (float, float) pass as they are (the network builds them so, for 10,000 clients a round);
    anything else (lists from a checkpoint, numpy numbers) is converted."""
    if type(values) is MappingProxyType:
        return values
    return MappingProxyType({
        int(k): v if type(v) is tuple and all(type(a) is float and type(b) is float for a, b in v)
        else tuple((float(a), float(b)) for a, b in v)
        for k, v in values.items()
    })


def _frozen_counts(values: Mapping[int, int]) -> Mapping[int, int]:
    return MappingProxyType({int(k): int(v) for k, v in values.items()})


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
    """When things happened in one round, measured from the round's start.

    ``deliveries``: per downlink stream, how it went over the air (physical mode).
    The fields after it describe each participant's activities for
    device energy and the timeline (empty in timings made before they existed,
    and in expected timings of the analytic backend where they are not drawn):

    * ``receptions``: the (start, end) of every downlink stream the client
      receives, in send order (a client sent M unicast models receives M);
    * ``t_compute_start``: when its local computation started;
    * ``t_upload_start``: when its upload got a channel and began (its
      ``t_computed`` when it uploads nothing; inf when it dropped out);
    * ``airtime``: how long its upload held the air, retransmissions included;
    * ``retransmissions`` and ``mcs``: per client, filled by link models that
      have them (empty otherwise);
    * ``ul_prbs``, ``ul_power_dbm``, ``ul_sinr_db``: per uploader on a carrier
      shared by PRBs (``physical.ul_scheduler``), the PRBs its upload held on
      average while on the air, its transmit power and its SINR with them
      (empty otherwise).

    ``t_next``: when the next round starts, if before ``t_end``. Under buffered asynchronous aggregation
    the server aggregates once ``buffer`` uploads have landed, so the next round can start while
    some of this round's uploads are still on their way. ``arrived`` is then the set of uploads that
    aggregation takes, including some dispatched in earlier rounds. None: the next round starts at ``t_end``.
    """

    t_received: Mapping[int, float]
    t_computed: Mapping[int, float]
    t_uploaded: Mapping[int, float]
    arrived: frozenset[int]
    t_end: float
    events: tuple[tuple[float, str], ...] = field(default=(), compare=False)
    time_unit: str = "T_dl"
    deliveries: tuple[StreamDelivery, ...] = ()
    receptions: Mapping[int, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    t_compute_start: Mapping[int, float] = field(default_factory=dict)
    t_upload_start: Mapping[int, float] = field(default_factory=dict)
    airtime: Mapping[int, float] = field(default_factory=dict)
    retransmissions: Mapping[int, int] = field(default_factory=dict)
    mcs: Mapping[int, int] = field(default_factory=dict)
    t_next: float | None = None
    ul_prbs: Mapping[int, float] = field(default_factory=dict)
    ul_power_dbm: Mapping[int, float] = field(default_factory=dict)
    ul_sinr_db: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.t_next is not None:
            set_(self, "t_next", float(self.t_next))
        set_(self, "deliveries", tuple(self.deliveries))
        for name in ("t_received", "t_computed", "t_uploaded", "t_compute_start", "t_upload_start", "airtime", "ul_prbs",
                     "ul_power_dbm", "ul_sinr_db"):
            set_(self, name, _frozen_mapping(getattr(self, name)))
        set_(self, "receptions", _frozen_intervals(self.receptions))
        set_(self, "retransmissions", _frozen_counts(self.retransmissions))
        set_(self, "mcs", _frozen_counts(self.mcs))
        set_(self, "arrived", frozenset(self.arrived))

    @property
    def has_activities(self) -> bool:
        """True when the per-client activity fields were filled (energy and the timeline need them)."""
        return bool(self.t_compute_start) or not self.t_computed

    @property
    def duration(self) -> float:
        """How long the round lasts on the run's clock: until the next round starts (``t_next``, else ``t_end``)."""
        return self.t_end if self.t_next is None else self.t_next

    def __reduce__(self):
        fields = (dict(self.t_received), dict(self.t_computed), dict(self.t_uploaded), self.arrived, self.t_end)
        activities = (
            dict(self.receptions), dict(self.t_compute_start), dict(self.t_upload_start), dict(self.airtime),
            dict(self.retransmissions), dict(self.mcs), self.t_next, dict(self.ul_prbs), dict(self.ul_power_dbm),
            dict(self.ul_sinr_db),
        )
        return (RoundTiming, (*fields, self.events, self.time_unit, self.deliveries, *activities))


@dataclass(frozen=True)
class UplinkChannel:
    """What the base station knows of every client's uplink at the start of a round (its CSI), indexed by
    client id: the instantaneous SINR and rate of this round's fading, and their means over the fading law.

    Made by the network from the round's own draws, read by channel-aware client schedulers (the learning
    side never sees a channel any other way). Linear SINR, rates in bit/s.
    """

    snr: tuple[float, ...]
    rate_bps: tuple[float, ...]
    mean_snr: tuple[float, ...]
    mean_rate_bps: tuple[float, ...]

    def __post_init__(self) -> None:
        for name in ("snr", "rate_bps", "mean_snr", "mean_rate_bps"):
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))
        if not len(self.snr) == len(self.rate_bps) == len(self.mean_snr) == len(self.mean_rate_bps):
            raise ValueError("uplink channel: snr, rate_bps, mean_snr and mean_rate_bps must have one entry per client")


@dataclass(frozen=True)
class AnalogCell:
    """One time-frequency cell of an analog transmission: the model coordinates up to ``stop`` (from the previous
    cell's stop) sent in one fading block on one subband, the devices that transmit them (``passed``: their SNR
    in this cell reaches the truncation threshold) and the receiver's relative noise 1/eta of this cell."""

    stop: int
    passed: frozenset[int]
    noise_var: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", int(self.stop))
        object.__setattr__(self, "passed", frozenset(int(c) for c in self.passed))
        object.__setattr__(self, "noise_var", float(self.noise_var))
        if not (self.noise_var >= 0 and math.isfinite(self.noise_var)):
            raise ValueError(f"analog cell: noise_var must be a finite variance >= 0, got {self.noise_var}")


@dataclass(frozen=True)
class AnalogAggregation:
    """One round of over-the-air aggregation as the network decides it (docs/levers.md): of the ``scheduled``
    devices, those whose instantaneous uplink SNR reaches the truncation threshold invert their channel and
    transmit together (``passed``); the others (``truncated``) are left out of the round.

    ``noise_var``: the receiver noise variance per real symbol relative to the power one aligned device's
    symbol arrives with, 1/eta (eta the received SNR of the alignment; 0 for a noiseless receiver).
    ``airtime_s``: the one analog transmission of d symbols (d the model's parameters) over the uplink band.

    ``cells``: under block fading, the transmission's cells in coordinate order (Zhu, Wang, Huang's broadband
    aggregation: truncation and alignment per fading block and subband), each with its own contributors and
    noise. Then ``passed`` is the devices that transmit in at least one cell, ``truncated`` those left out of
    every cell, and ``noise_var`` the mean of the cells' over the coordinates that someone sends. Empty (fading
    held for the round): one cell, ``passed`` and ``noise_var`` for every coordinate.
    """

    passed: frozenset[int]
    truncated: frozenset[int]
    noise_var: float
    airtime_s: float
    cells: tuple[AnalogCell, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "passed", frozenset(int(c) for c in self.passed))
        object.__setattr__(self, "truncated", frozenset(int(c) for c in self.truncated))
        object.__setattr__(self, "cells", tuple(self.cells))
        if self.passed & self.truncated:
            raise ValueError(f"analog aggregation: clients {sorted(self.passed & self.truncated)} both passed and truncated")
        if not (self.noise_var >= 0 and math.isfinite(self.noise_var)):
            raise ValueError(f"analog aggregation: noise_var must be a finite variance >= 0, got {self.noise_var}")
        if not (self.airtime_s >= 0 and math.isfinite(self.airtime_s)):
            raise ValueError(f"analog aggregation: airtime_s must be finite and >= 0, got {self.airtime_s}")
        if self.cells:
            stops = [cell.stop for cell in self.cells]
            if any(not isinstance(cell, AnalogCell) for cell in self.cells) or stops[0] <= 0 or any(b <= a for a, b in zip(stops, stops[1:])):
                raise ValueError(f"analog aggregation: cells must be AnalogCells with increasing stops > 0, got stops {stops[:8]}")
            senders = frozenset().union(*(cell.passed for cell in self.cells))
            if senders != self.passed:
                raise ValueError(f"analog aggregation: passed {sorted(self.passed)} must be the devices of the cells, {sorted(senders)}")
