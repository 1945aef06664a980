"""How close is the project's TR 38.901 calibration drop to the 3GPP calibration results?

Run: python scripts/calibration_percentiles.py [--users 5700] [--seed 0]

Drops users over a 19-site x 3-sector layout with wraparound (``topology.drop_federation``), UMa at 500 m ISD and
UMi at 200 m, 6 GHz, 20 MHz, the ``tr38901-calibration`` link budget, full load, twice: the plain drop (every user
outdoors at 1.5 m, one element a sector tilted 12 degrees) and the calibrated one (``topology.CALIBRATION``: 80%
indoor users with the mixed O2I loss, TR 36.873 floors, a 10-element vertical array tilted electrically). It prints
the 5/50/95th percentiles of the coupling loss (path loss and O2I loss less every antenna gain, to the serving
sector) and of the geometry (serving power over the other sectors', without noise: the reference's geometry
factor) beside the 3GPP reference figures, and the geometry SINR (``topology.geometry_sinr_db`` with the noise,
the quantity tests/network/test_topology.py checks against Sionna SYS's ``geometry_sinr_db``).

The reference figures are the 6 GHz large-scale calibration curves of 3GPP R1-165974 (the median over the
companies' calibration results, TR 38.900 v14.0.0 parameters), read at the 5th, 50th and 95th percentiles from the
tabulated curves in QuaDRiGa's ``tutorials/calib_3GPP_ref_data.m`` (arrays ``cl38900a`` and ``gf38900a``, given
there as path gains and geometry at the CDF levels 5, 10, ..., 95 %; scenario 1 UMi, 2 UMa; frequency 1 is 6 GHz).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from wirelessfl.network import PhysicalChannel
from wirelessfl.network import topology as topo

REFERENCE = {
    "UMa": {"coupling_loss_db": (86.0, 120.3, 150.4), "geometry_db": (-1.0, 8.6, 25.6)},
    "UMi": {"coupling_loss_db": (74.8, 112.2, 142.3), "geometry_db": (-1.7, 7.3, 24.9)},
}
"""3GPP R1-165974 at 6 GHz, 5/50/95th percentiles (see the module docstring for where they were read)."""

LAYOUTS = {"UMa": (500.0, 35.0), "UMi": (200.0, 10.0)}
"""ISD and minimum distance (m) of the TR 38.901 Table 7.8-1 calibration layouts."""

DROPS = {"plain": {}, "calibrated": topo.CALIBRATION}
"""The topology fields of each drop printed."""


def percentiles(scenario: str, users: int, seed: int, calibrated: bool = False) -> dict[str, np.ndarray]:
    """The drop's coupling loss, geometry (no noise) and geometry SINR percentiles (5, 50, 95)."""
    isd, closest = LAYOUTS[scenario]
    channel = PhysicalChannel.from_dict({
        "link_budget": "tr38901-calibration", "path_loss_model": scenario, "carrier_ghz": 6.0, "min_distance_m": closest,
        "bandwidth_hz": 20e6, "topology": {"rings": 2, "isd_m": isd, "users": "all", **DROPS["calibrated" if calibrated else "plain"]},
    })
    drop = topo.drop_federation(channel, channel.topology, users, np.random.default_rng(seed))
    gains = channel.bs_antenna_gain_dbi + channel.ue_antenna_gain_dbi
    coupling = drop.all_coupling_loss_db - gains
    noise = channel.noise_dbm_hz("dl") + 10 * math.log10(channel.bandwidth_hz)
    sinr = topo.geometry_sinr_db(coupling, channel.bs_power_dbm, noise)
    sir = topo.geometry_sinr_db(coupling, channel.bs_power_dbm, -math.inf)
    return {
        "coupling_loss_db": np.percentile(coupling.min(axis=1), [5, 50, 95]),
        "geometry_db": np.percentile(sir, [5, 50, 95]),
        "geometry_sinr_db": np.percentile(sinr, [5, 50, 95]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=5700)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| scenario | metric | plain drop (5 / 50 / 95) | calibrated drop (5 / 50 / 95) | 3GPP R1-165974, 6 GHz (5 / 50 / 95) |")
    print("|---|---|---|---|---|")
    for scenario in ("UMa", "UMi"):
        plain = percentiles(scenario, args.users, args.seed)
        calibrated = percentiles(scenario, args.users, args.seed, calibrated=True)
        for metric, label in (("coupling_loss_db", "coupling loss (dB)"), ("geometry_db", "geometry (dB)"),
                              ("geometry_sinr_db", "geometry SINR (dB)")):
            columns = [" / ".join(f"{v:.1f}" for v in drop[metric]) for drop in (plain, calibrated)]
            theirs = " / ".join(f"{v:.1f}" for v in REFERENCE[scenario][metric]) if metric in REFERENCE[scenario] else "-"
            print(f"| {scenario} | {label} | {columns[0]} | {columns[1]} | {theirs} |")


if __name__ == "__main__":
    main()
