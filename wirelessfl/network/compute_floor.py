"""When a physical profile's round is mostly its compute floor ``t_min``.

In physical mode times are seconds, and ``t_min`` keeps its default of 1 (one
T_dl in normalised mode, one second here). A model of a few hundred thousand
parameters crosses a 10 MHz cell in tens of milliseconds, so a round is then about one
second of fixed compute, and methods that send more or fewer streams barely
differ in time. The cost preview says so in one line (``compute_floor_note``)
for a profile that does not set ``t_min`` itself.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..seam import CommPlan
from .model import NetworkModel
from .profile import SystemProfile

DOMINANT_SHARE = 0.5
"""The note is printed when the compute floor is more than this share of a FedAvg round."""


def compute_floor_share(profile: SystemProfile, num_clients: int, model_params: int) -> tuple[float, float]:
    """``(round seconds, compute floor's share of it)`` of one FedAvg round (every client receives one broadcast,
    trains, uploads one model) under ``profile``, its users dropped from seed 0: the share is 1 less the round
    without compute time (``t_min`` 0, ``mu`` inf) over the round as the profile has it."""
    plan = CommPlan.broadcast(range(num_clients), model_params=model_params)
    as_given = NetworkModel(profile, num_clients, np.random.default_rng(0)).time_round(plan, np.random.default_rng(1)).t_end
    without = dataclasses.replace(profile, t_min=0.0, mu=math.inf)
    transfers = NetworkModel(without, num_clients, np.random.default_rng(0)).time_round(plan, np.random.default_rng(1)).t_end
    if not (math.isfinite(as_given) and as_given > 0):
        return as_given, 0.0
    return as_given, max(0.0, 1.0 - transfers / as_given)


def compute_floor_note(index: int, entry: Mapping[str, Any], profile: SystemProfile, num_clients: int, model_params: int) -> str | None:
    """One line when ``networks[index]`` has a physical channel, leaves ``t_min`` at its default and the
    compute floor is more than ``DOMINANT_SHARE`` of a FedAvg round; None otherwise."""
    given = "t_min" in entry or isinstance(profile.t_min, tuple)
    if profile.physical is None or profile.backend != "des" or given or model_params <= 0:
        return None
    round_s, share = compute_floor_share(profile, num_clients, model_params)
    if share <= DOMINANT_SHARE:
        return None
    return (
        f"networks[{index}] ({profile.name}): the compute floor t_min = {profile.t_min:g} s (not set in this entry; "
        f"seconds in physical mode) is {100 * share:.0f}% of a FedAvg round of {round_s:.3g} s, so round times differ little "
        "between methods; set t_min to your devices' compute time per round (docs/scenario-reference.md, Networks)"
    )
