"""A 10,000-user, 21-sector NR round: how much CPU the realistic cell costs against a single-cell round.

Run: python benchmarks/bench_multicell.py [--users 10000] [--rounds 3]

The cell: TR 38.901 UMa at 3.5 GHz, 7 sites x 3 sectors at 500 m with wraparound, users over every site, the
calibration link budget, load 0.5, open-loop uplink power control (P0 -80 dBm, alpha 0.8), walking users (1.4 m/s:
25.9 ms blocks), 8 subbands, the NR link (20 MHz at 30 kHz), DDDSU TDD, one shared uplink carrier, and a LeNet-5
sized model (61,706 parameters, 2 Mbit) sent to 21 multicast groups (one per sector's worth of users, in user
order) at 90% coverage with unicast repairs, every user uploading. Each variant times ``--rounds`` rounds after the
drop and prints their CPU time per round (``time.process_time``, so a loaded machine's waiting is not counted), the
ratio to the single-cell reference round (the same users, link and payloads in one cell, flat fading, mean
interference: none) timed in this process, the share of users in outage (an infinite upload) and the round's end.
The target is under 1 s of CPU for the faded, EESM round. The last variant splits the shared uplink carrier
into PRB shares with power control per share (``ul_scheduler: equal_prb``, ``proportional_fair``) instead of the
time share.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.seam import CommPlan, Stream

MODEL_PARAMS = 61_706
CELL = {
    "link_budget": "tr38901-calibration", "path_loss_model": "UMa", "carrier_ghz": 3.5, "min_distance_m": 35,
    "bandwidth_hz": 20e6, "ue_speed_mps": 1.4, "link": "nr", "nr": {"subcarrier_spacing_khz": 30},
    "uplink": "shared", "ul_p0_dbm": -80, "ul_alpha": 0.8, "tdd_pattern": "DDDSU",
    "multicast": "coverage", "coverage_q": 0.9,
}
LAYOUT = {"rings": 1, "isd_m": 500, "sectors": 3, "load": 0.5, "users": "all"}
VARIANTS = {
    "single cell, flat blocks (reference)": {"cell_radius_m": 289},
    "21 sectors, mean interference, 8 subbands": {"topology": LAYOUT, "subbands": 8},
    "21 sectors, faded interference, 8 subbands": {"topology": {**LAYOUT, "interference": "faded"}, "subbands": 8},
    "21 sectors, faded interference, 8 subbands, EESM": {
        "topology": {**LAYOUT, "interference": "faded"}, "subbands": 8, "subband_mapping": "eesm"},
    "21 sectors, faded interference, 8 subbands, EESM, equal PRB split": {
        "topology": {**LAYOUT, "interference": "faded"}, "subbands": 8, "subband_mapping": "eesm", "ul_scheduler": "equal_prb"},
    "21 sectors, faded interference, 8 subbands, EESM, PF PRB split": {
        "topology": {**LAYOUT, "interference": "faded"}, "subbands": 8, "subband_mapping": "eesm", "ul_scheduler": "proportional_fair"},
}


def plan_for(users: int, streams: int = 21) -> CommPlan:
    groups = np.array_split(np.arange(users), streams)
    everyone = dict.fromkeys(range(users), 1.0)
    return CommPlan(streams=tuple(Stream(1.0, g.tolist()) for g in groups), uplink=everyone, work=everyone,
                    model_params=MODEL_PARAMS)


def time_variant(extra: dict, users: int, rounds: int) -> tuple[float, float, float]:
    """(CPU seconds per round, share of users in outage, the last round's end in seconds)."""
    profile = SystemProfile.from_dict({"name": "bench", "t_min": 0.05, "mu": 20.0, "physical": {**CELL, **extra}})
    network = NetworkModel(profile, users, np.random.default_rng(0))
    plan = plan_for(users)
    network.time_round(plan, np.random.default_rng(999))  # warm-up: NR tables, EESM tables, block use
    start = time.process_time()
    for r in range(rounds):
        timing = network.time_round(plan, np.random.default_rng(r))
    seconds = (time.process_time() - start) / rounds
    uploaded = np.array(list(timing.t_uploaded.values()))
    return seconds, float(np.mean(~np.isfinite(uploaded))), timing.t_end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    reference = None
    print(f"{args.users} users, {args.rounds} rounds each, CPU time per round (process_time)")
    for name, extra in VARIANTS.items():
        seconds, outage, end = time_variant(extra, args.users, args.rounds)
        reference = reference or seconds
        ended = f"{end:.2f} s" if math.isfinite(end) else "inf"
        print(f"{name:66s} {seconds:6.3f} s/round  x{seconds / reference:5.2f}  outage {outage:6.2%}  round end {ended}")


if __name__ == "__main__":
    main()
