"""Device energy and per-client activity of a unit's rounds, from its recorded plans and timings.

The learning side knows what each client computes (its plan's relative
``work``, the client's training-set size, the local epochs); the network side
knows when each client received, computed, waited and uploaded (its
``RoundTiming``). Both cross the seam already, so the accounting is done here,
after the fact, from the same records whether a unit trained per profile or
was replayed. Only battery budgets act during training (a depleted device
stops taking part); ``run.unit.Unit`` runs the same ``Ledger`` round by round
so what it decided and what the tables say cannot differ. Imports neither
torch nor simpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wirelessfl.network.energy import (
    Battery, DeviceEnergy, EnergyProfile, RoundActivity, join, round_activity, rounds_activity, split, values_of,
)
from wirelessfl.seam import CommPlan, RoundTiming

TRACE_ENERGY_COLUMNS = (
    "energy_j", "energy_mean_j", "energy_max_j", "energy_compute_j", "energy_tx_j", "energy_rx_j", "energy_idle_j",
    "cum_energy_j", "cum_energy_max_j", "depleted",
)
"""Energy columns of the trace (documented in docs/results.md)."""

CLIENT_ENERGY_COLUMNS = (
    "energy_j", "energy_compute_j", "energy_tx_j", "energy_rx_j", "energy_idle_j", "rounds_taken_part", "depleted_round",
)


CLIENT_ROUNDS_LIMIT = 2_000_000
"""Most rows ``client_rounds.parquet`` gets; a larger run skips the table and the timeline, with a note
(a row is about 300 bytes in memory: two million rows are about 600 MB)."""


def client_round_rows(scenario) -> int:
    """Upper bound of the per-client round table's rows: rounds x clients x curves x profiles x seeds."""
    curves = sum(len(algo.expand()) for algo in scenario.algorithms)
    return scenario.rounds * scenario.data.clients * curves * len(scenario.networks) * len(scenario.seeds)


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
    """Energy of every round of ``records`` (round 0 first) timed as ``timings`` under ``network``'s profile.

    Every round is priced in one batch (``rounds_activity``); batteries, when set, are then charged round
    by round. Rounds whose timing predates the activity fields are NaN, and so is everything cumulative after.
    """
    n = len(ledger.device.budget_j)
    rounds = [(rec, timings[index - 1]) for index, rec in enumerate(records) if rec.round > 0]
    priced = [(rec, timing) for rec, timing in rounds if timing.has_activities]
    jobs = None
    if any(timing.t_next is not None for _, timing in priced):  # buffered async: each job until the aggregation taking it
        jobs = buffered_jobs([timing for _, timing in priced])
    flat, counts = rounds_activity(
        [timing for _, timing in priced],
        [samples_processed(rec.plan, ledger.train_sizes, ledger.local_epochs) for rec, _ in priced],
        ledger.device,
        None if jobs is None else jobs[1],
    )
    parts = split(flat, counts)
    if np.isfinite(ledger.device.budget_j).any():
        arrivals = []
        for k, (rec, timing) in enumerate(priced):
            parts[k], arrived = ledger.battery.settle(rec.round, timing, parts[k])
            arrivals.append(arrived)
        flat = join(parts) if parts else flat
    else:
        arrivals = [timing.arrived for _, timing in priced] if jobs is None else jobs[0]
    energy = flat.energy_j
    spent = np.zeros(n)
    cumulative = 0.0
    trace: dict[str, list[float]] = {name: [0.0] for name in TRACE_ENERGY_COLUMNS}
    trace["depleted"] = [0]
    cum_per_row = np.zeros(len(energy))
    depleted_rounds = np.sort(ledger.battery.depleted_round[ledger.battery.depleted_round > 0])
    offset, k = 0, 0
    for rec, timing in rounds:
        if not timing.has_activities:
            values = dict.fromkeys(TRACE_ENERGY_COLUMNS[:7], math.nan)
            cumulative = math.nan
        else:
            part, end = parts[k], offset + int(counts[k])
            values = _round_columns(part)
            spent[part.clients] += part.energy_j
            cum_per_row[offset:end] = spent[part.clients]
            offset, k = end, k + 1
        cumulative += values["energy_j"]
        for name, value in values.items():
            trace[name].append(value)
        trace["cum_energy_j"].append(cumulative)
        trace["cum_energy_max_j"].append(float(spent.max()) if math.isfinite(cumulative) else math.nan)
        trace["depleted"].append(int(np.searchsorted(depleted_rounds, rec.round, side="right")))
    clients = {
        "energy_compute_j": np.bincount(flat.clients, weights=flat.compute_j, minlength=n),
        "energy_tx_j": np.bincount(flat.clients, weights=flat.tx_j, minlength=n),
        "energy_rx_j": np.bincount(flat.clients, weights=flat.rx_j, minlength=n),
        "energy_idle_j": np.bincount(flat.clients, weights=flat.idle_j, minlength=n),
        "rounds_taken_part": np.bincount(flat.clients, minlength=n).astype(np.int64),
        "depleted_round": ledger.battery.depleted_round.copy(),
    }
    clients["energy_j"] = clients["energy_compute_j"] + clients["energy_tx_j"] + clients["energy_rx_j"] + clients["energy_idle_j"]
    table = None
    if per_client_rounds:
        table = _client_rounds(priced, flat, counts, arrivals, cum_per_row, ledger, network)
    return Accounting(trace, clients, table)


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


def buffered_jobs(timings: list[RoundTiming]) -> tuple[list[frozenset[int]], list[dict[int, float]]]:
    """Under buffered asynchronous aggregation, per round: its participants whose upload the server took (in that
    round or a later one: ``arrived`` names the uploads a round's aggregation takes, which may have been sent in
    earlier rounds), and each participant's job end, measured from the round's start: the aggregation that took
    its upload, after which it is dispatched again; for an upload still in flight when the run ends, its landing;
    for one that never lands (outage: its client stays in flight, and keeps trying), the run's end.
    So each client's jobs tile its time once: idle time after a landing is charged until the aggregation."""
    durations = [timing.duration for timing in timings]
    taken_at: dict[int, int] = {}  # client -> the round whose aggregation takes its latest job seen so far
    arrivals: list[frozenset[int]] = []
    ends: list[dict[int, float]] = []
    for index in range(len(timings) - 1, -1, -1):
        timing = timings[index]
        for client in timing.arrived:
            taken_at[client] = index
        own: dict[int, float] = {}
        taken: set[int] = set()
        for client in timing.t_computed:
            later = taken_at.pop(client, None)
            if later is None:  # in flight at the run's end: until its landing; an upload in outage never lands
                landed = float(timing.t_uploaded[client])
                own[client] = landed if math.isfinite(landed) else float(sum(durations[index:]))
            else:
                own[client] = float(sum(durations[index:later + 1]))  # this round's duration itself when taken in it
                taken.add(client)
        arrivals.append(frozenset(taken))
        ends.append(own)
    return arrivals[::-1], ends[::-1]


CLIENT_ROUND_COLUMNS = (
    "round", "client", "distance_m", "snr_db", "samples", "streams_received", "receive_time", "compute_time",
    "wait_time", "upload_time", "idle_time", "airtime", "t_compute_start", "t_computed", "t_upload_start", "t_uploaded",
    "dl_rate", "ul_rate", "arrived", "missed", "energy_j", "energy_compute_j", "energy_tx_j", "energy_rx_j",
    "energy_idle_j", "cum_energy_j", "depleted", "retransmissions", "mcs", "receptions",
)
"""Columns of ``client_rounds.parquet`` after the unit's identifying columns (docs/results.md)."""

PRB_COLUMNS = ("ul_prbs", "ul_power_dbm", "ul_sinr_db")
"""Written after ``CLIENT_ROUND_COLUMNS`` only by profiles whose shared uplink is split by PRBs
(``physical.ul_scheduler``), so other runs' tables keep their bytes; NaN for a participant that sent nothing."""


def _client_rounds(
    priced: list, flat: RoundActivity, counts: np.ndarray, arrivals: list[frozenset[int]], cum_per_row: np.ndarray,
    ledger: Ledger, network,
) -> dict[str, np.ndarray]:
    """The columns of ``client_rounds.parquet`` for the priced rounds, flat like ``flat``."""
    round_of = np.repeat(np.array([rec.round for rec, _ in priced], dtype=np.int64), counts)
    per_model = [rec.plan.model_params * network.profile.bits_per_parameter for rec, _ in priced]
    dl_bits = np.zeros(len(flat.clients))
    ul_bits: list[float] = []
    uploaded: list[float] = []
    receptions: list[tuple] = []
    arrived: list[bool] = []
    retransmissions: list[int] = []
    mcs: list[int] = []
    prb_use: dict[str, list[float]] = {name: [] for name in PRB_COLUMNS}
    offset = 0
    for (rec, timing), count, bits, made_it in zip(priced, counts.tolist(), per_model, arrivals):
        ids = flat.clients[offset:offset + count]
        id_list = ids.tolist()
        for stream in rec.plan.streams:
            dl_bits[offset + np.searchsorted(ids, sorted(stream.receivers))] += stream.payload * bits
        ul_bits += [v * bits for v in values_of(rec.plan.uplink, id_list, missing=0.0)]
        uploaded += values_of(timing.t_uploaded, id_list)
        receptions += values_of(timing.receptions, id_list)
        arrived += [c in made_it for c in id_list]
        retransmissions += [timing.retransmissions.get(c, 0) for c in id_list] if timing.retransmissions else [0] * count
        mcs += [timing.mcs.get(c, -1) for c in id_list] if timing.mcs else [-1] * count
        for name, values in prb_use.items():
            values += [getattr(timing, name).get(c, math.nan) for c in id_list]
        offset += count
    ul = np.array(ul_bits, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        dl_rate = np.where(flat.receive > 0, dl_bits / flat.receive, np.nan)
        ul_rate = np.where(flat.upload > 0, ul / flat.upload, np.nan)
    clients = flat.clients
    distance = network.distances_m[clients] if network.distances_m is not None else np.full(len(clients), np.nan)
    snr = ledger.snr_db(network)
    made = np.array(arrived, dtype=bool)
    column = np.empty(len(receptions), dtype=object)
    column[:] = receptions
    return {
        "round": round_of,
        "client": clients,
        "distance_m": distance,
        "snr_db": snr[clients] if snr is not None else np.full(len(clients), np.nan),
        "samples": flat.samples,
        "streams_received": flat.streams,
        "receive_time": flat.receive,
        "compute_time": flat.compute,
        "wait_time": flat.wait,
        "upload_time": flat.upload,
        "idle_time": flat.idle,
        "airtime": flat.airtime,
        "t_compute_start": flat.t_compute_start,
        "t_computed": flat.t_computed,
        "t_upload_start": flat.t_upload_start,
        "t_uploaded": np.array(uploaded, dtype=float),
        "dl_rate": dl_rate,
        "ul_rate": ul_rate,
        "arrived": made,
        "missed": ~made & (ul > 0),
        "energy_j": flat.energy_j,
        "energy_compute_j": flat.compute_j,
        "energy_tx_j": flat.tx_j,
        "energy_rx_j": flat.rx_j,
        "energy_idle_j": flat.idle_j,
        "cum_energy_j": cum_per_row,
        "depleted": ledger.battery.depleted_round[clients] == round_of,
        "retransmissions": np.array(retransmissions, dtype=np.int64),
        "mcs": np.array(mcs, dtype=np.int64),
        "receptions": column,
        **({name: np.array(values, dtype=float) for name, values in prb_use.items()}
           if any(timing.ul_prbs for _, timing in priced) else {}),
    }
