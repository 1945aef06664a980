"""Device energy per round: computation, radio transmit and receive, and idle waiting.

Computation follows Yang et al., "Energy Efficient Federated Learning Over
Wireless Communication Networks", IEEE TWC 20(3), 2021, eq. (4): a device that
processes D samples at c CPU cycles per sample and frequency f spends
κ·c·D·f² joules (κ the effective switched capacitance). D counts what the
algorithm really computes: its plan's relative ``work`` (1 = the scenario's
local epochs over the client's training set) x local epochs x training-set
size, so PFLEGO's cheap head steps, FedEM's M components and FedFomo's
evaluation passes cost what they are. Compute *time* stays the profile's
shifted exponential; computation cut by the round's end (a deadline) pays
the share of it done by then.

Radio follows constant-power states, as LTE/NR device power models do
(Huang et al., "A Close Examination of Performance and Power Characteristics
of 4G LTE Networks", MobiSys 2012; Jensen et al., "LTE UE Power Consumption
Model", VTC-Fall 2012): transmit power while its upload holds the air
(retransmissions included), receive power while a downlink stream it is sent
is on the air (M streams, M receptions), idle power for the rest of the
round, waiting for the downlink, a channel or the others. A device not in
the round's plan spends nothing in it.

Defaults: κ = 1e-28, c = 2e4 cycles/sample (the middle of Yang et al.'s
[1, 3]·1e4) and f = 2 GHz (their f_max); the radio powers are Huang et al.'s
LTE model P = α_u·r_u + α_d·r_d + β (α_u = 438.39 mW/Mbit/s, α_d = 51.97
mW/Mbit/s, β = 1288.04 mW) at their measured median rates of 6 Mbit/s up and
13 Mbit/s down: 3.918 W transmitting, 1.964 W receiving, and their 1060 mW
RRC_CONNECTED tail power for idle. Times of a normalised profile are in T_dl;
``seconds_per_unit`` says how many seconds one is (default 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import chain
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..seam import RoundTiming

PER_GROUP = ("kappa", "cycles_per_sample", "cpu_hz", "p_tx_w", "p_rx_w", "p_idle_w", "budget_j")
"""Fields that take one value per device group (a list) or one value for every device."""

LIMITS: dict[str, tuple[float, str]] = {
    "kappa": (1e-20, "1e-28 is a phone CPU's effective switched capacitance"),
    "cycles_per_sample": (1e12, "1e4-1e5 cycles per sample for small models"),
    "cpu_hz": (1e11, "1-3 GHz for a phone"),
    "p_tx_w": (1e3, "0.1-5 W for a phone's radio while transmitting"),
    "p_rx_w": (1e3, "0.1-3 W while receiving"),
    "p_idle_w": (1e3, "0.01-1.1 W while idle or connected and waiting"),
    "budget_j": (1e9, "a phone battery holds about 5e4 J"),
    "seconds_per_unit": (1e9, "the length of one T_dl in seconds"),
}


def _value(field: str, value: Any, *, zero_ok: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"energy.{field} must be a number, got {value!r}")
    number = float(value)
    limit, why = LIMITS[field.split("[")[0]]
    if math.isnan(number) or number < 0 or (number == 0 and not zero_ok) or not math.isfinite(number):
        relation = ">= 0" if zero_ok else "> 0"
        raise ValueError(f"energy.{field} must be a finite number {relation}, got {number:g}")
    if number > limit:
        raise ValueError(f"energy.{field} must be at most {limit:g} ({why}), got {number:g}")
    return number


@dataclass(frozen=True)
class EnergyProfile:
    """A profile's device energy parameters; each of ``PER_GROUP`` is a number or one value per device group.

    With G values and n devices, device i is in group ``i·G // n``, the rule of
    the profile's ``t_min``/``mu`` lists; when those are lists too, G must equal
    their length. ``budget_j`` (unset: no budget) is each device's battery: a
    device stops taking part once it has spent it.
    """

    kappa: float | tuple[float, ...] = 1e-28
    cycles_per_sample: float | tuple[float, ...] = 2e4
    cpu_hz: float | tuple[float, ...] = 2e9
    p_tx_w: float | tuple[float, ...] = 3.918
    p_rx_w: float | tuple[float, ...] = 1.964
    p_idle_w: float | tuple[float, ...] = 1.060
    budget_j: float | tuple[float, ...] | None = None
    seconds_per_unit: float = 1.0

    def __post_init__(self) -> None:
        for name in PER_GROUP:
            value = getattr(self, name)
            if value is None and name == "budget_j":
                continue
            zero_ok = name.startswith("p_")
            if isinstance(value, (list, tuple)):
                if not value:
                    raise ValueError(f"energy.{name} must be a number or a non-empty list of numbers, got []")
                value = tuple(_value(f"{name}[{i}]", v, zero_ok=zero_ok) for i, v in enumerate(value))
            else:
                value = _value(name, value, zero_ok=zero_ok)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "seconds_per_unit", _value("seconds_per_unit", self.seconds_per_unit, zero_ok=False))
        lengths = {name: len(getattr(self, name)) for name in PER_GROUP if isinstance(getattr(self, name), tuple)}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{name} {n}" for name, n in lengths.items())
            raise ValueError(f"energy: every list must have one value per device group, the same number; got {shown}")

    @property
    def groups(self) -> int:
        """Number of device groups the lists give (1 when every field is a number)."""
        return next((len(getattr(self, n)) for n in PER_GROUP if isinstance(getattr(self, n), tuple)), 1)

    @property
    def has_budget(self) -> bool:
        return self.budget_j is not None

    def check_groups(self, compute_groups: int) -> None:
        """Energy lists and the profile's ``t_min``/``mu`` lists describe the same device groups."""
        if self.groups > 1 and compute_groups > 1 and self.groups != compute_groups:
            listed = next(n for n in PER_GROUP if isinstance(getattr(self, n), tuple))
            raise ValueError(
                f"energy.{listed} lists {self.groups} values but t_min/mu give {compute_groups} device groups; "
                "give one value per group or a single number"
            )

    def per_device(self, num_clients: int) -> DeviceEnergy:
        """Every parameter as an array over devices 0..n-1."""
        groups = self.groups
        if groups > num_clients:
            raise ValueError(f"energy lists give {groups} device groups but the network has only {num_clients} clients")
        group_of = np.arange(num_clients) * groups // num_clients

        def spread(value) -> np.ndarray:
            if value is None:
                return np.full(num_clients, math.inf)
            values = np.asarray(value if isinstance(value, tuple) else (value,) * groups, dtype=float)
            return values[group_of]

        kappa, cycles, hz = spread(self.kappa), spread(self.cycles_per_sample), spread(self.cpu_hz)
        return DeviceEnergy(
            joules_per_sample=kappa * cycles * hz * hz,
            p_tx_w=spread(self.p_tx_w),
            p_rx_w=spread(self.p_rx_w),
            p_idle_w=spread(self.p_idle_w),
            budget_j=spread(self.budget_j),
            seconds_per_unit=self.seconds_per_unit,
        )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> EnergyProfile:
        if values is None:
            return cls()
        if not isinstance(values, Mapping):
            raise ValueError(f"energy must be a mapping of energy settings, got {values!r}")
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in values if k not in allowed)
        if unknown:
            raise ValueError(f"energy: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
        given = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**given)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}


def split_entry(entry: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """A ``networks:`` entry without its ``energy`` key (what ``SystemProfile.from_dict`` takes), and that key."""
    profile = dict(entry)
    return profile, profile.pop("energy", None)


@dataclass(frozen=True)
class DeviceEnergy:
    """``EnergyProfile`` spread over the devices: arrays indexed by client id."""

    joules_per_sample: np.ndarray
    p_tx_w: np.ndarray
    p_rx_w: np.ndarray
    p_idle_w: np.ndarray
    budget_j: np.ndarray
    seconds_per_unit: float


@dataclass(frozen=True)
class RoundActivity:
    """Each participant's times (from the timing), its time (in the profile's unit) in each state within
    [0, t_end], the samples it computed, and its energy (J)."""

    clients: np.ndarray
    t_compute_start: np.ndarray
    t_computed: np.ndarray
    t_upload_start: np.ndarray
    airtime: np.ndarray
    samples: np.ndarray
    receive: np.ndarray
    compute: np.ndarray
    wait: np.ndarray
    upload: np.ndarray
    idle: np.ndarray
    streams: np.ndarray
    compute_j: np.ndarray
    tx_j: np.ndarray
    rx_j: np.ndarray
    idle_j: np.ndarray

    @property
    def energy_j(self) -> np.ndarray:
        return self.compute_j + self.tx_j + self.rx_j + self.idle_j


def values_of(mapping: Mapping[int, Any], ids: list[int], missing: Any = None):
    """``mapping``'s values for ``ids`` in that order (``missing`` for an id it lacks, if given); without a lookup
    per client when the mapping is in that order (the timing's mappings all are: the network builds them from
    one list of participants)."""
    if len(mapping) == len(ids) and list(mapping) == ids:
        return mapping.values()
    if missing is None:
        return [mapping[c] for c in ids]
    return [mapping.get(c, missing) for c in ids]


def aligned(mapping: Mapping[int, Any], ids: list[int], missing: Any = None) -> np.ndarray:
    """``values_of`` as a float array."""
    return np.fromiter(values_of(mapping, ids, missing), dtype=float, count=len(ids))


def _overlap(start: np.ndarray, end: np.ndarray, horizon: float) -> np.ndarray:
    return np.clip(np.minimum(end, horizon) - np.minimum(start, horizon), 0.0, None)


def round_activity(timing: RoundTiming, samples: Mapping[int, float], device: DeviceEnergy) -> RoundActivity:
    """Time in each state and energy of every participant of one round (the keys of ``timing.t_computed``).

    ``samples``: training-pass samples each participant processes. Waiting for
    an uplink channel after computing is ``wait``; every other gap in [0, t_end]
    (before and between receptions, after the upload) is ``idle``; both at idle
    power.
    """
    return rounds_activity([timing], [samples], device)[0]


def rounds_activity(
    timings: Sequence[RoundTiming], samples: Sequence[Mapping[int, float]], device: DeviceEnergy,
    horizons: Sequence[Mapping[int, float]] | None = None,
) -> tuple[RoundActivity, np.ndarray]:
    """``round_activity`` of many rounds at once: one flat ``RoundActivity``, round after round, and each round's
    number of participants (a run's rounds in a few array operations instead of a few dozen per round).

    ``horizons``, per round, gives each participant its own end in place of the round's ``t_end``: under
    buffered asynchronous aggregation a job runs from its dispatch until the aggregation that takes it."""
    ids: list[int] = []
    start: list[float] = []
    computed: list[float] = []
    upload_start: list[float] = []
    airtime: list[float] = []
    receptions: list[tuple] = []
    work: list[float] = []
    counts: list[int] = []
    ends: list[float] = []
    for timing, sample in zip(timings, samples, strict=True):
        if not timing.has_activities:
            raise ValueError("this round's timing has no per-client activities (written by an older wirelessfl); "
                             "energy needs them: rerun the unit")
        id_list = list(timing.t_computed)
        ids += id_list
        start += values_of(timing.t_compute_start, id_list)
        computed += timing.t_computed.values()
        upload_start += values_of(timing.t_upload_start, id_list)
        airtime += values_of(timing.airtime, id_list)
        receptions += values_of(timing.receptions, id_list)
        work += values_of(sample, id_list, missing=0.0)
        counts.append(len(id_list))
        ends.append(float(timing.t_end))
    count = np.array(counts, dtype=np.int64)
    horizon = np.repeat(np.array(ends), count)
    if horizons is not None:
        horizon = np.fromiter(
            chain.from_iterable(
                values_of(own, list(timing.t_computed), missing=float(timing.t_end)) for own, timing in zip(horizons, timings, strict=True)
            ), dtype=float, count=len(ids),
        )
    start_, computed_, upload_start_ = np.array(start, dtype=float), np.array(computed, dtype=float), np.array(upload_start, dtype=float)
    airtime_, work_ = np.array(airtime, dtype=float), np.array(work, dtype=float)
    clients = np.array(ids, dtype=np.int64)
    streams = np.fromiter(map(len, receptions), dtype=np.int64, count=len(receptions))
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(receptions)), dtype=float, count=2 * int(streams.sum()))
    pieces = _overlap(flat[0::2], flat[1::2], np.repeat(horizon, streams))
    receive = np.bincount(np.repeat(np.arange(len(ids)), streams), weights=pieces, minlength=len(ids))
    compute = _overlap(start_, computed_, horizon)
    sending = np.isfinite(upload_start_)
    upload = np.where(sending, _overlap(upload_start_, upload_start_ + airtime_, horizon), 0.0)
    wait = np.where(sending, _overlap(computed_, upload_start_, horizon), 0.0)
    idle = np.clip(horizon - receive - compute - wait - upload, 0.0, None)
    duration = computed_ - start_
    with np.errstate(invalid="ignore", divide="ignore"):
        done = np.where(duration > 0, compute / np.where(duration > 0, duration, 1.0), 1.0)
    seconds = device.seconds_per_unit
    activity = RoundActivity(
        clients=clients,
        t_compute_start=start_,
        t_computed=computed_,
        t_upload_start=upload_start_,
        airtime=airtime_,
        samples=work_,
        receive=receive,
        compute=compute,
        wait=wait,
        upload=upload,
        idle=idle,
        streams=streams,
        compute_j=device.joules_per_sample[clients] * work_ * done,
        tx_j=device.p_tx_w[clients] * upload * seconds,
        rx_j=device.p_rx_w[clients] * receive * seconds,
        idle_j=device.p_idle_w[clients] * (idle + wait) * seconds,
    )
    return activity, count


def split(activity: RoundActivity, counts: np.ndarray) -> list[RoundActivity]:
    """The per-round parts of a flat ``RoundActivity`` (views, not copies)."""
    ends = np.cumsum(counts).tolist()
    names = [f.name for f in fields(activity)]
    return [
        RoundActivity(**{name: getattr(activity, name)[a:b] for name in names})
        for a, b in zip([0, *ends[:-1]], ends)
    ]


def join(parts: list[RoundActivity]) -> RoundActivity:
    """The flat ``RoundActivity`` of per-round parts, round after round."""
    names = [f.name for f in fields(RoundActivity)]
    return RoundActivity(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in names})


SEGMENT_KINDS = ("idle", "receive", "compute", "wait", "upload")


def segments(
    receptions: tuple[tuple[float, float], ...], compute_start: float, computed: float, upload_start: float,
    airtime: float, t_end: float,
) -> list[tuple[str, float, float]]:
    """One participant's round as consecutive ``(kind, start, end)`` covering [0, t_end] (the timeline).

    The upload is one segment of its airtime: the link models' retransmissions (NR's HARQ) are per transport
    block, one slot each, interleaved with the first transmissions inside that airtime.
    """
    busy: list[tuple[str, float, float]] = [("receive", a, b) for a, b in receptions]
    busy.append(("compute", compute_start, computed))
    if math.isfinite(upload_start) and airtime > 0:
        busy.append(("wait", computed, upload_start))
        busy.append(("upload", upload_start, upload_start + airtime))
    out: list[tuple[str, float, float]] = []
    now = 0.0
    for kind, a, b in sorted(busy, key=lambda s: (s[1], s[2])):
        a, b = min(max(a, now), t_end), min(b, t_end)
        if a > now:
            out.append(("idle", now, a))
        if b > a:
            out.append((kind, a, b))
            now = b
        now = max(now, a)
    if now < t_end:
        out.append(("idle", now, t_end))
    return out


class Battery:
    """Each device's spent energy against its budget, round after round.

    A device takes part in a round only while it has energy left. One whose
    round would cost more than it has left stops at the moment its budget runs
    out (power integrated along its timeline): its upload counts only if it had
    landed by then, and it spends exactly its budget. Either way it is depleted
    from then on.
    """

    def __init__(self, device: DeviceEnergy) -> None:
        self.device = device
        self.spent = np.zeros(len(device.budget_j))
        self.depleted_round = np.zeros(len(device.budget_j), dtype=np.int64)

    @property
    def depleted(self) -> np.ndarray:
        """Ids of devices with no energy left."""
        return np.flatnonzero(self.spent >= self.device.budget_j)

    def settle(self, round: int, timing: RoundTiming, activity: RoundActivity) -> tuple[RoundActivity, frozenset[int]]:
        """Charge one round: the activity as it was paid for (cut where a battery ran out) and who still arrived."""
        ids = activity.clients
        left = self.device.budget_j[ids] - self.spent[ids]
        dying = np.flatnonzero(activity.energy_j > left)
        arrived = set(timing.arrived)
        parts = {name: getattr(activity, name).copy() for name in ("compute_j", "tx_j", "rx_j", "idle_j")}
        for row in dying.tolist():
            client = int(ids[row])
            paid = self._paid_until_empty(timing, activity, row, float(left[row]))
            for name in parts:
                parts[name][row] = paid[name]
            if not timing.t_uploaded[client] <= paid["time"]:
                arrived.discard(client)
        charged = RoundActivity(**{**{f.name: getattr(activity, f.name) for f in fields(activity)}, **parts})
        self.spent[ids] += charged.energy_j
        self.spent[ids[dying]] = self.device.budget_j[ids[dying]]  # exactly its budget, whatever the rounding
        emptied = ids[(self.spent[ids] >= self.device.budget_j[ids]) & (self.depleted_round[ids] == 0)]
        self.depleted_round[emptied] = round
        return charged, frozenset(arrived)

    def _paid_until_empty(self, timing: RoundTiming, activity: RoundActivity, row: int, left_j: float) -> dict[str, float]:
        client = int(activity.clients[row])
        device, seconds = self.device, self.device.seconds_per_unit
        duration = timing.t_computed[client] - timing.t_compute_start[client]
        compute_w = activity.compute_j[row] / (activity.compute[row] * seconds) if activity.compute[row] > 0 else 0.0
        watts = {"receive": ("rx_j", device.p_rx_w[client]), "compute": ("compute_j", compute_w),
                 "upload": ("tx_j", device.p_tx_w[client]),
                 "wait": ("idle_j", device.p_idle_w[client]), "idle": ("idle_j", device.p_idle_w[client])}
        paid = {"compute_j": 0.0, "tx_j": 0.0, "rx_j": 0.0, "idle_j": 0.0, "time": math.inf}
        if duration <= 0 and activity.compute_j[row] > 0:  # an instantaneous computation is paid at its start
            cost = min(activity.compute_j[row], left_j)
            paid["compute_j"], left_j = cost, left_j - cost
            if left_j <= 0:
                paid["time"] = timing.t_compute_start[client]
                return paid
        for kind, a, b in segments(
            timing.receptions[client], timing.t_compute_start[client], timing.t_computed[client],
            timing.t_upload_start[client], timing.airtime[client], timing.t_end,
        ):
            part, power = watts[kind]
            cost = power * (b - a) * seconds
            if cost >= left_j:
                paid[part] += left_j
                paid["time"] = a + (left_j / (power * seconds) if power > 0 else 0.0)
                return paid
            paid[part] += cost
            left_j -= cost
        return paid
