"""What each downlink stream cost on the air in physical mode: its rate and its unicast repairs.

A multicast under ``coverage: q`` runs at the rate the best ⌈q·n⌉ receivers decode and repairs
the others by unicast; under ``worst_user`` it runs at the weakest receiver's rate and repairs
nothing. ``streams_link.csv`` holds one row per stream of every round (``run.rows.delivery_rows``);
summary.md gets one line per physical profile.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from wirelessfl.results.io import atomic_write_frame

COLUMNS = ["curve", "profile", "seed", "round", "stream", "receivers", "bits", "seconds", "rate_bps", "repair_bits", "repaired"]


def link_notes(links: pd.DataFrame) -> list[str]:
    """Per profile: the median and lowest stream rate, and the repair traffic as a share of the multicast bits."""
    notes = []
    for profile, rows in links.groupby("profile", sort=False):
        rates = rows["rate_bps"].to_numpy(dtype=float)
        bits = float(rows["bits"].sum())
        repair = float(rows["repair_bits"].sum())
        share = repair / bits if bits > 0 else 0.0
        notes.append(
            f"{profile} streams (streams_link.csv): median rate {np.median(rates) / 1e6:.3g} Mbit/s, lowest "
            f"{rates.min() / 1e6:.3g} Mbit/s over {len(rows)} streams; unicast repairs {100 * share:.3g}% of the "
            f"multicast bits, {rows['repaired'].mean():.2g} receivers per stream."
        )
    return notes


def outage_warnings(client_rounds: pd.DataFrame | None, horizon_s: float) -> list[str]:
    """One line per profile timed in seconds where most participant-rounds (over curves and seeds) were in
    outage: the model's reception or upload took longer than ``horizon_s``, or the upload never landed
    (``t_uploaded`` inf: a rate of 0 or a transfer given up on)."""
    if client_rounds is None or client_rounds.empty:
        return []
    lines = []
    for profile, rows in client_rounds[client_rounds["time_unit"] == "s"].groupby("profile", sort=False):
        out = ~np.isfinite(rows["t_uploaded"].to_numpy(dtype=float))
        out |= ~(rows["receive_time"].to_numpy(dtype=float) <= horizon_s) | ~(rows["upload_time"].to_numpy(dtype=float) <= horizon_s)
        if out.mean() > 0.5:
            lines.append(
                f"on {profile}, {100 * out.mean():.0f}% of the participants' rounds were in outage (receiving or sending "
                f"the model took over {horizon_s:,.0f} s, or never ended): the link budget leaves most clients out; "
                "raise the powers or make the cell smaller"
            )
    return lines


def write_link_report(run_dir, links: pd.DataFrame) -> list[str]:
    """Write ``streams_link.csv`` (nothing without physical streams) and return summary.md's notes."""
    if links is None or links.empty:
        return []
    atomic_write_frame(Path(run_dir) / "streams_link.csv", links[COLUMNS])
    return link_notes(links)
