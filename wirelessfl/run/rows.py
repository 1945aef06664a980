"""A unit's tables under one profile: trace rows, per-client rows, per-client rounds, and stream deliveries.

Rows are made after training from the recorded plans and timings, the same way
for a unit trained under the profile and for one replayed through it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from wirelessfl.accounting import CLIENT_ENERGY_COLUMNS, Ledger, account
from wirelessfl.config import Scenario
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.results.io import FIT_COLUMNS, SAMPLE_COLUMNS
from wirelessfl.run.curves import Curve
from wirelessfl.run.evaluation import RoundRecord
from wirelessfl.run.seeds import network_rng
from wirelessfl.seam import RoundTiming


def time_records(
    records: list[RoundRecord], network: NetworkModel, profile: SystemProfile, seed: int
) -> list[RoundTiming]:
    """Replay recorded plans through one profile (the train-once path)."""
    return [network.time_round(rec.plan, network_rng(seed, profile.name, rec.round)) for rec in records[1:]]


def delivery_rows(
    curve: Curve, seed: int, profile: SystemProfile, records: list[RoundRecord], timings: list[RoundTiming]
) -> list[dict[str, Any]]:
    """One row per downlink stream of every round in physical mode: its receivers, bits, seconds, the
    multicast's rate and the unicast repair traffic (``streams_link.csv``)."""
    rows = []
    for rec, timing in zip((r for r in records if r.round > 0), timings):
        for stream in timing.deliveries:
            rows.append({
                "curve": curve.curve, "profile": profile.name, "seed": seed, "round": rec.round,
                "stream": stream.label, "receivers": stream.receivers, "bits": stream.bits,
                "seconds": stream.seconds, "rate_bps": stream.rate_bps, "repair_bits": stream.repair_bits,
                "repaired": stream.repaired,
            })
    return rows


def rows_for(
    scenario: Scenario, curve: Curve, seed: int, profile: SystemProfile, records: list[RoundRecord],
    timings: list[RoundTiming], network: NetworkModel, groups: np.ndarray, train_sizes: np.ndarray | None = None,
    client_rounds: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], pd.DataFrame | None]:
    """Trace rows, per-client rows and (with ``client_rounds``) the per-client, per-round table of one
    unit under ``profile``; energy from ``train_sizes`` (the clients' training-set sizes)."""
    if train_sizes is None:
        train_sizes = np.zeros(network.num_clients)
    ledger = Ledger(scenario.energy_profiles()[profile.name], network.num_clients, train_sizes, scenario.training.local_epochs)
    energy = account(records, timings, ledger, network, per_client_rounds=client_rounds)
    rows = []
    time = cum_dl = cum_ul = 0.0
    unit = timings[0].time_unit if timings else ("s" if profile.physical is not None else "T_dl")
    for index, rec in enumerate(records):
        if rec.round == 0:
            round_time = dl = ul = 0.0
            dl_bits = ul_bits = 0.0
        else:
            timing = timings[index - 1]
            round_time = timing.duration
            dl, ul = rec.plan.downlink_payload, rec.plan.uplink_payload
            dl_bits, ul_bits = network.bits(rec.plan)
        time += round_time
        cum_dl += dl
        cum_ul += ul
        rows.append(
            {
                "scenario": scenario.name,
                "algorithm": curve.algorithm,
                "variant": curve.variant,
                "curve": curve.curve,
                "profile": profile.name,
                "seed": seed,
                "round": rec.round,
                "time": time,
                "time_unit": unit,
                "round_time": round_time,
                **{k: rec.metrics.get(k, math.nan) for k in ("avg_acc", "worst_acc", "p10_acc", "avg_val_acc", "mean_loss", "unseen_acc")},
                "train_loss": rec.metrics.get("train_loss", math.nan),
                **({k: rec.metrics.get(k, math.nan) for k in FIT_COLUMNS} if scenario.eval_train else {}),
                **({k: rec.metrics.get(k, math.nan) for k in SAMPLE_COLUMNS} if scenario.evaluation.clients != "all" else {}),
                "dl_payload": dl,
                "ul_payload": ul,
                "dl_bits": dl_bits,
                "ul_bits": ul_bits,
                "cum_dl_payload": cum_dl,
                "cum_ul_payload": cum_ul,
                "streams": rec.streams,
                "aggregated": rec.aggregated,
                "participants": rec.participants,
                **{name: values[index] for name, values in energy.trace.items()},
            }
        )
    last = records[-1]
    clients = [
        {
            "scenario": scenario.name,
            "algorithm": curve.algorithm,
            "variant": curve.variant,
            "curve": curve.curve,
            "profile": profile.name,
            "seed": seed,
            "client": i,
            "group": int(groups[i]),
            "accuracy": float(acc),
            **{name: energy.clients[name][i].item() for name in CLIENT_ENERGY_COLUMNS},
        }
        for i, acc in enumerate(last.client_acc)
    ]
    per_round = None
    if energy.client_rounds is not None:
        ids = {"scenario": scenario.name, "algorithm": curve.algorithm, "variant": curve.variant, "curve": curve.curve,
               "profile": profile.name, "seed": seed, "time_unit": unit}
        per_round = pd.DataFrame({**ids, **energy.client_rounds}) if len(energy.client_rounds["client"]) else None
        if per_round is not None:
            per_round.insert(per_round.columns.get_loc("client") + 1, "group", groups[per_round["client"].to_numpy()])
    return rows, clients, per_round
