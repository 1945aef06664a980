"""Indoor users of a TR 38.901 drop: who is indoors, on which floor, and the outdoor-to-indoor loss, pure numpy.

TR 38.901 §7.8's calibration drop puts 80% of the users indoors (Table 7.8-1). An indoor user's loss to every
site is the outdoor path loss over the whole 2D distance plus the O2I penetration loss of §7.4.3.1, eq. 7.4-2:
PL_tw + PL_in + N(0, σ_P²), one draw per user (it is the same building whichever site it hears; QuaDRiGa's
``gen_o2i_loss`` and Sionna's O2I loss share it over sites too). Table 7.4.3-1's material losses (f in GHz):
L_glass = 2 + 0.2f, L_IIRglass = 23 + 0.3f, L_concrete = 5 + 4f; Table 7.4.3-2's walls:

* low loss: PL_tw = 5 − 10·log10(0.3·10^(−L_glass/10) + 0.7·10^(−L_concrete/10)), σ_P = 4.4 dB;
* high loss: PL_tw = 5 − 10·log10(0.7·10^(−L_IIRglass/10) + 0.3·10^(−L_concrete/10)), σ_P = 6.5 dB;

PL_in = 0.5·d_2D-in with d_2D-in the smaller of two U(0, 25 m) draws (UMa and UMi). ``mixed`` takes the low-loss
wall for half of the users, as the calibration does (QuaDRiGa's default ``low_loss_fraction`` 0.5). The user's LOS
state towards a site uses d_2D-out = d_2D − d_2D-in (§7.4.3), and its shadowing the O2I column of Table 7.5-6
(7 dB UMa, 7.82 dB UMi).

Heights (``ut_height: floors``, TR 36.873 Table 6-1 as Table 7.8-1 cites it): an indoor user lives on floor
n_fl ~ U{1, ..., N_fl} of a building of N_fl ~ U{4, ..., 8} floors, at h_UT = 3(n_fl − 1) + 1.5 m; outdoor users
stay at 1.5 m. The height enters the path loss, UMa's LOS probability and the elevation angle towards each site.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import pathloss

O2I_MODELS = ("mixed", "low", "high")
UT_HEIGHT_MODELS = ("fixed", "floors")
INDOOR_SCENARIOS = ("UMa", "UMi")
MAX_INDOOR_DISTANCE_M = 25.0
"""TR 38.901 §7.4.3.1: d_2D-in is the minimum of two U(0, 25 m) draws for UMa and UMi."""
PENETRATION_STD_DB = {"low": 4.4, "high": 6.5}
"""σ_P of Table 7.4.3-2's low- and high-loss models."""
O2I_SHADOWING_STD_DB = {"UMa": 7.0, "UMi": 7.82}
"""TR 38.901 Table 7.5-6, the O2I column's σ_SF."""
FLOOR_HEIGHT_M = 3.0
BUILDING_FLOORS = (4, 8)
"""TR 36.873 Table 6-1: N_fl ~ U{4, ..., 8}, h_UT = 3(n_fl − 1) + 1.5 m."""


def wall_loss_db(model: str, carrier_ghz: float) -> float:
    """PL_tw of TR 38.901 Table 7.4.3-2 for the ``low`` or ``high`` loss building (see the module docstring)."""
    concrete = 5.0 + 4.0 * carrier_ghz
    if model == "low":
        glass = 2.0 + 0.2 * carrier_ghz
        return 5.0 - 10.0 * math.log10(0.3 * 10.0 ** (-glass / 10.0) + 0.7 * 10.0 ** (-concrete / 10.0))
    glass = 23.0 + 0.3 * carrier_ghz
    return 5.0 - 10.0 * math.log10(0.7 * 10.0 ** (-glass / 10.0) + 0.3 * 10.0 ** (-concrete / 10.0))


def floor_probabilities() -> dict[int, float]:
    """P(n_fl = k) = (1/5)·Σ_{N = max(4, k)}^{8} 1/N: the floor a TR 36.873 indoor user lives on."""
    low, high = BUILDING_FLOORS
    buildings = high - low + 1
    return {k: sum(1.0 / n for n in range(max(low, k), high + 1)) / buildings for k in range(1, high + 1)}


@dataclass(frozen=True)
class UserStates:
    """Per point: indoor or not, the UT height, the indoor distance d_2D-in (0 outdoors) and the O2I loss (dB)."""

    indoor: np.ndarray
    height_m: np.ndarray
    indoor_distance_m: np.ndarray
    o2i_loss_db: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, count: int, indoor_fraction: float, o2i: str, ut_height: str,
             carrier_ghz: float) -> UserStates:
        """Draw ``count`` points' states. Draw order: indoor (``rng.random``), the wall (``rng.random``, ``mixed``
        only), d_2D-in (two ``rng.random`` a point), σ_P's normal, then N_fl and n_fl (``floors`` only)."""
        indoor = rng.random(count) < indoor_fraction
        low = rng.random(count) < 0.5 if o2i == "mixed" else np.full(count, o2i == "low")
        distance = MAX_INDOOR_DISTANCE_M * rng.random((count, 2)).min(axis=1)
        wall = np.where(low, wall_loss_db("low", carrier_ghz), wall_loss_db("high", carrier_ghz))
        sigma = np.where(low, PENETRATION_STD_DB["low"], PENETRATION_STD_DB["high"])
        loss = wall + 0.5 * distance + sigma * rng.standard_normal(count)
        height = np.full(count, pathloss.UT_DEFAULT_HEIGHT_M)
        if ut_height == "floors":
            floors = rng.integers(BUILDING_FLOORS[0], BUILDING_FLOORS[1] + 1, count)
            level = rng.integers(1, floors + 1)
            height = np.where(indoor, FLOOR_HEIGHT_M * (level - 1) + pathloss.UT_DEFAULT_HEIGHT_M, height)
        return cls(indoor, height, np.where(indoor, distance, 0.0), np.where(indoor, loss, 0.0))


def draw_large_scale(scenario: str, distance_m: np.ndarray, carrier_ghz: float, states: UserStates,
                     rng: np.random.Generator, shadowing: bool = True) -> pathloss.LargeScale:
    """``[points, sites]`` loss of points in ``states``: TR 38.901's path loss at each point's height over the whole
    2D distance, the LOS state drawn on d_2D-out, shadowing (the O2I σ_SF indoors) and the O2I loss. Draw order
    as ``pathloss.draw_large_scale``: one ``rng.random`` for the LOS states, then one ``rng.standard_normal``."""
    outdoor_distance = np.maximum(distance_m - states.indoor_distance_m[:, None], 1e-3)
    probability = np.empty_like(distance_m)
    basic = np.empty_like(distance_m)
    sigma = np.empty_like(distance_m)
    heights = np.unique(states.height_m)
    for height in heights:
        rows = states.height_m == height
        probability[rows] = pathloss.los_probability(scenario, outdoor_distance[rows], float(height))
    los = rng.random(distance_m.shape) < probability
    for height in heights:
        rows = states.height_m == height
        basic[rows] = pathloss.path_loss_db(scenario, distance_m[rows], carrier_ghz, los[rows], h_ut_m=float(height))
        sigma[rows] = pathloss.shadow_fading_std_db(scenario, distance_m[rows], carrier_ghz, los[rows], h_ut_m=float(height))
    sigma = np.where(states.indoor[:, None], O2I_SHADOWING_STD_DB[scenario], sigma)
    shadow = sigma * rng.standard_normal(distance_m.shape) if shadowing else np.zeros(distance_m.shape)
    return pathloss.LargeScale(loss_db=basic + shadow + states.o2i_loss_db[:, None], los=los, shadowing_db=shadow, sigma_db=sigma)
