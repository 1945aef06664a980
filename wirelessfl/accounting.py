"""Device energy and per-client activity of a unit's rounds, from its recorded plans and timings.

The learning side knows what each client computes (its plan's relative
``work``, the client's training-set size, the local epochs); the network side
knows when each client received, computed, waited and uploaded (its
``RoundTiming``). Both cross the seam already, so the accounting is done here,
after the fact, from the same records whether a unit trained per profile or
was replayed. Only battery budgets act during training (a depleted device
stops taking part); ``simulate.Unit`` runs the same ``Ledger`` round by round
so what it decided and what the tables say cannot differ. Imports neither
torch nor simpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wirelessfl.network.energy import Battery, DeviceEnergy, EnergyProfile, RoundActivity, aligned, round_activity
from wirelessfl.seam import CommPlan, RoundTiming

TRACE_ENERGY_COLUMNS = (
    "energy_j", "energy_mean_j", "energy_max_j", "energy_compute_j", "energy_tx_j", "energy_rx_j", "energy_idle_j",
    "cum_energy_j", "cum_energy_max_j", "depleted",
)
"""Energy columns of the trace (documented in docs/results.md)."""

CLIENT_ENERGY_COLUMNS = (
    "energy_j", "energy_compute_j", "energy_tx_j", "energy_rx_j", "energy_idle_j", "rounds_taken_part", "depleted_round",
)


def samples_processed(plan: CommPlan, train_sizes: np.ndarray, local_epochs: int) -> dict[int, float]:
    """Training-pass samples each participant computes: relative work x local epochs x training-set size."""
    return {c: w * local_epochs * float(train_sizes[c]) for c, w in plan.work.items()}


class Ledger:
    """One unit's energy under one profile, round after round (a ``Battery`` when budgets are set)."""

    def __init__(self, energy: EnergyProfile, num_clients: int, train_sizes: np.ndarray, local_epochs: int) -> None:
        self.device: DeviceEnergy = energy.per_device(num_clients)
        self.battery = Battery(self.device)
        self.train_sizes = np.asarray(train_sizes, dtype=float)
        self.local_epochs = local_epochs
        self._snr: tuple[object, np.ndarray | None] | None = None

    def snr_db(self, network) -> np.ndarray | None:
        """The network's nominal downlink SNR per client, computed once."""
        if self._snr is None or self._snr[0] is not network:
            self._snr = (network, network.nominal_downlink_snr_db())
        return self._snr[1]

    def charge(self, round: int, plan: CommPlan, timing: RoundTiming) -> tuple[RoundActivity | None, frozenset[int]]:
        """The round's activity as paid for, and who arrived (minus devices whose battery ran out first).
        None (and ``timing.arrived``) for a timing without activities, written by an older wirelessfl."""
        if not timing.has_activities:
            return None, timing.arrived
        activity = round_activity(timing, samples_processed(plan, self.train_sizes, self.local_epochs), self.device)
        return self.battery.settle(round, timing, activity)


@dataclass
class Accounting:
    """Per-round trace columns (aligned with the records, round 0 first), per-client totals, per-client rounds."""

    trace: dict[str, list[float]]
    clients: dict[str, np.ndarray]
    client_rounds: dict[str, np.ndarray] | None = field(default=None)


def account(
    records, timings: list[RoundTiming], ledger: Ledger, network, per_client_rounds: bool = True
) -> Accounting:
    """Energy of every round of ``records`` (round 0 first) timed as ``timings`` under ``network``'s profile."""
    n = len(ledger.device.budget_j)
    trace: dict[str, list[float]] = {name: [] for name in TRACE_ENERGY_COLUMNS}
    totals = {name: np.zeros(n) for name in ("energy_compute_j", "energy_tx_j", "energy_rx_j", "energy_idle_j")}
    taken_part = np.zeros(n, dtype=np.int64)
    spent = np.zeros(n)
    cumulative = 0.0
    pieces: list[dict[str, np.ndarray]] = []
    for index, rec in enumerate(records):
        if rec.round == 0:
            values = dict.fromkeys(TRACE_ENERGY_COLUMNS[:7], 0.0)
            activity = None
        else:
            timing = timings[index - 1]
            activity, arrived = ledger.charge(rec.round, rec.plan, timing)
            if activity is None:
                values = dict.fromkeys(TRACE_ENERGY_COLUMNS[:7], math.nan)
                cumulative = math.nan
            else:
                values = _round_columns(activity)
                ids = activity.clients
                for name, part in (("energy_compute_j", activity.compute_j), ("energy_tx_j", activity.tx_j),
                                   ("energy_rx_j", activity.rx_j), ("energy_idle_j", activity.idle_j)):
                    totals[name][ids] += part
                spent[ids] += activity.energy_j
                taken_part[ids] += 1
                if per_client_rounds:
                    pieces.append(_client_round(rec.round, rec.plan, timing, activity, arrived, spent, ledger, network))
        cumulative += values["energy_j"]
        for name, value in values.items():
            trace[name].append(value)
        trace["cum_energy_j"].append(cumulative)
        trace["cum_energy_max_j"].append(float(spent.max()) if math.isfinite(cumulative) else math.nan)
        trace["depleted"].append(int(np.count_nonzero(ledger.battery.depleted_round > 0)))
    clients = {**totals, "energy_j": sum(totals.values()), "rounds_taken_part": taken_part,
               "depleted_round": ledger.battery.depleted_round.copy()}
    rounds = None
    if per_client_rounds:
        rounds = {key: np.concatenate([p[key] for p in pieces]) for key in pieces[0]} if pieces else _empty_client_rounds()
    return Accounting(trace, clients, rounds)


def _round_columns(activity: RoundActivity) -> dict[str, float]:
    energy = activity.energy_j
    return {
        "energy_j": float(energy.sum()),
        "energy_mean_j": float(energy.mean()) if len(energy) else 0.0,
        "energy_max_j": float(energy.max()) if len(energy) else 0.0,
        "energy_compute_j": float(activity.compute_j.sum()),
        "energy_tx_j": float(activity.tx_j.sum()),
        "energy_rx_j": float(activity.rx_j.sum()),
        "energy_idle_j": float(activity.idle_j.sum()),
    }


CLIENT_ROUND_COLUMNS = (
    "round", "client", "distance_m", "snr_db", "samples", "streams_received", "receive_time", "compute_time",
    "wait_time", "upload_time", "idle_time", "airtime", "t_compute_start", "t_computed", "t_upload_start", "t_uploaded",
    "dl_rate", "ul_rate", "arrived", "missed", "energy_j", "energy_compute_j", "energy_tx_j", "energy_rx_j",
    "energy_idle_j", "cum_energy_j", "depleted", "retransmissions", "mcs", "receptions",
)
"""Columns of ``client_rounds.parquet`` after the unit's identifying columns (docs/results.md)."""


def _client_round(
    round: int, plan: CommPlan, timing: RoundTiming, activity: RoundActivity, arrived: frozenset[int],
    spent: np.ndarray, ledger: Ledger, network,
) -> dict[str, np.ndarray]:
    ids = activity.clients
    id_list = ids.tolist()
    per_model = plan.model_params * network.profile.bits_per_parameter
    dl_bits = np.zeros(len(ids))
    for stream in plan.streams:
        dl_bits[np.searchsorted(ids, sorted(stream.receivers))] += stream.payload * per_model
    ul_bits = aligned(plan.uplink, id_list, missing=0.0) * per_model
    with np.errstate(divide="ignore", invalid="ignore"):
        dl_rate = np.where(activity.receive > 0, dl_bits / activity.receive, np.nan)
        ul_rate = np.where(activity.upload > 0, ul_bits / activity.upload, np.nan)
    distance = network.distances_m[ids] if network.distances_m is not None else np.full(len(ids), np.nan)
    snr = ledger.snr_db(network)
    made_it = np.isin(ids, np.fromiter(arrived, dtype=np.int64, count=len(arrived)))
    return {
        "round": np.full(len(ids), round, dtype=np.int64),
        "client": ids,
        "distance_m": distance,
        "snr_db": snr[ids] if snr is not None else np.full(len(ids), np.nan),
        "samples": activity.samples,
        "streams_received": activity.streams,
        "receive_time": activity.receive,
        "compute_time": activity.compute,
        "wait_time": activity.wait,
        "upload_time": activity.upload,
        "idle_time": activity.idle,
        "airtime": activity.airtime,
        "t_compute_start": activity.t_compute_start,
        "t_computed": activity.t_computed,
        "t_upload_start": activity.t_upload_start,
        "t_uploaded": aligned(timing.t_uploaded, id_list),
        "dl_rate": dl_rate,
        "ul_rate": ul_rate,
        "arrived": made_it,
        "missed": ~made_it & (ul_bits > 0),
        "energy_j": activity.energy_j,
        "energy_compute_j": activity.compute_j,
        "energy_tx_j": activity.tx_j,
        "energy_rx_j": activity.rx_j,
        "energy_idle_j": activity.idle_j,
        "cum_energy_j": spent[ids].copy(),
        "depleted": ledger.battery.depleted_round[ids] == round,
        "retransmissions": _counts(timing.retransmissions, id_list, 0),
        "mcs": _counts(timing.mcs, id_list, -1),
        "receptions": aligned(timing.receptions, id_list, dtype=object),
    }


def _counts(values, ids: list[int], missing: int) -> np.ndarray:
    if not values:
        return np.full(len(ids), missing, dtype=np.int64)
    return np.array([values.get(c, missing) for c in ids], dtype=np.int64)


def _empty_client_rounds() -> dict[str, np.ndarray]:
    return {name: np.zeros(0) for name in CLIENT_ROUND_COLUMNS}
