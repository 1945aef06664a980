"""3GPP TR 38.901 (V17) large-scale channel: path loss, LOS probability, shadow fading.

Pure numpy, vectorised over arrays of 2D distances; a profile selects it with
``physical.path_loss_model`` (``physical.static_loss_db``). Three outdoor scenarios:

* ``"UMa"``: urban macro, BS height 25 m;
* ``"UMi"``: urban micro, street canyon, BS height 10 m;
* ``"RMa"``: rural macro, BS height 35 m, average building height ``h`` 5 m and
  street width ``W`` 20 m.

References (3GPP TR 38.901 V17.0.0, "Study on channel model for frequencies from
0.5 to 100 GHz"):

* Table 7.4.1-1, path loss models, their shadow-fading standard deviations and
  applicability ranges. ``fc`` is in GHz, distances in metres, and the speed of
  light is c = 3.0e8 m/s as the table's notes state.
* Table 7.4.2-1, LOS probability (outdoor users).

The formulas were checked against two established implementations, by reading them
and by hand-computing values (see tests/network/test_channel.py): NVlabs Sionna
(``sionna/phy/channel/tr38901/{uma,umi,rma}_scenario.py``, ``_compute_pathloss_basic``
and ``los_probability``) and ns-3 (``three-gpp-propagation-loss-model.cc``). Two
known differences from Sionna, both small: Sionna uses c = 299,792,458 m/s in the
breakpoint distance (0.07 % shorter here) and draws UMa's effective environment
height h_E (see ``breakpoint_distance_m``).

Simplifications, stated once:

* UMa's effective environment height h_E (Table 7.4.1-1 Note 1) is random in the
  TR: 1 m with probability 1/(1 + C(d2D, h_UT)), otherwise uniform on
  {12, 15, ..., h_UT - 1.5}. Here **h_E = 1 m always**. This is exact for user
  heights below 13 m, where C = 0 (every outdoor user at the default 1.5 m); for
  users on high floors it keeps the breakpoint farther than the TR's draw would
  (less LOS loss beyond it).
* The functions here are outdoor: the outdoor-to-indoor penetration loss (TR 7.4.3)
  and indoor users' LOS on d_2D-out are ``network/indoor.py``'s, for a multi-cell
  layout; no car penetration, no spatially correlated shadowing (each user draws
  its own, independent, log-normal shadowing).
* The optional NLOS models of Table 7.4.1-1 are not implemented.

Out-of-range inputs raise a one-line ``ValueError`` naming the parameter and the
allowed range; the path loss models are empirical and extrapolate badly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SPEED_OF_LIGHT_M_S = 3.0e8
"""TR 38.901 Table 7.4.1-1 notes: c = 3.0 x 10^8 m/s."""

SCENARIOS = ("UMa", "UMi", "RMa")


@dataclass(frozen=True)
class ScenarioRanges:
    """Applicability ranges of one scenario, closed intervals (TR 38.901 Table 7.4.1-1)."""

    fc_ghz: tuple[float, float]
    d2d_los_m: tuple[float, float]
    d2d_nlos_m: tuple[float, float]
    h_bs_m: tuple[float, float]
    h_ut_m: tuple[float, float]
    h_bs_default_m: float


RANGES: dict[str, ScenarioRanges] = {
    # UMa: 10 m <= d2D <= 5 km; 1.5 m <= h_UT <= 22.5 m; h_BS = 25 m (the table fixes it).
    "UMa": ScenarioRanges((0.5, 100.0), (10.0, 5_000.0), (10.0, 5_000.0), (25.0, 25.0), (1.5, 22.5), 25.0),
    # UMi-Street Canyon: 10 m <= d2D <= 5 km; 1.5 m <= h_UT <= 22.5 m; h_BS = 10 m.
    "UMi": ScenarioRanges((0.5, 100.0), (10.0, 5_000.0), (10.0, 5_000.0), (10.0, 10.0), (1.5, 22.5), 10.0),
    # RMa: LOS 10 m <= d2D <= 10 km, NLOS 10 m <= d2D <= 5 km; 10 m <= h_BS <= 150 m;
    # 1 m <= h_UT <= 10 m; validated up to 30 GHz (ns-3 enforces the same 0.5-30 GHz).
    "RMa": ScenarioRanges((0.5, 30.0), (10.0, 10_000.0), (10.0, 5_000.0), (10.0, 150.0), (1.0, 10.0), 35.0),
}
"""The applicability ranges enforced by every function here."""

RMA_BUILDING_HEIGHT_RANGE_M = (5.0, 50.0)
RMA_STREET_WIDTH_RANGE_M = (5.0, 50.0)
RMA_DEFAULT_BUILDING_HEIGHT_M = 5.0
RMA_DEFAULT_STREET_WIDTH_M = 20.0
UT_DEFAULT_HEIGHT_M = 1.5

SHADOW_FADING_STD_DB: dict[str, dict[str, float]] = {
    "UMa": {"los": 4.0, "nlos": 6.0},
    "UMi": {"los": 4.0, "nlos": 7.82},
    # RMa LOS: 4 dB up to the breakpoint distance, 6 dB beyond it.
    "RMa": {"los": 4.0, "los_beyond_breakpoint": 6.0, "nlos": 8.0},
}
"""Shadow-fading standard deviations sigma_SF in dB, TR 38.901 Table 7.4.1-1."""


# --------------------------------------------------------------------------- checks


def _scenario(scenario: str) -> ScenarioRanges:
    if scenario not in RANGES:
        raise ValueError(f"scenario must be one of {', '.join(repr(s) for s in SCENARIOS)}, got {scenario!r}")
    return RANGES[scenario]


def _scalar_in(name: str, value: float, bounds: tuple[float, float], why: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number in [{bounds[0]:g}, {bounds[1]:g}] ({why}), got {value!r}")
    number = float(value)
    if not (bounds[0] <= number <= bounds[1]):  # also refuses nan
        raise ValueError(f"{name} must be in [{bounds[0]:g}, {bounds[1]:g}] ({why}), got {number:g}")
    return number


def _distances(name: str, values, bounds: tuple[float, float], why: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.size and not (np.all(array >= bounds[0]) and np.all(array <= bounds[1])):  # nan fails both
        bad = array[~((array >= bounds[0]) & (array <= bounds[1]))].flat[0]
        raise ValueError(f"{name} must be in [{bounds[0]:g}, {bounds[1]:g}] m ({why}), got {bad:g}")
    return array


def _heights(scenario: str, h_bs_m: float | None, h_ut_m: float) -> tuple[float, float]:
    ranges = _scenario(scenario)
    h_bs = ranges.h_bs_default_m if h_bs_m is None else h_bs_m
    table = f"TR 38.901 Table 7.4.1-1, {scenario}"
    return (
        _scalar_in("h_bs_m", h_bs, ranges.h_bs_m, table),
        _scalar_in("h_ut_m", h_ut_m, ranges.h_ut_m, table),
    )


def bs_height_m(scenario: str) -> float:
    """The scenario's default base-station height (UMa 25 m, UMi 10 m, RMa 35 m)."""
    return _scenario(scenario).h_bs_default_m


def _frequency(scenario: str, fc_ghz: float) -> float:
    return _scalar_in("fc_ghz", fc_ghz, _scenario(scenario).fc_ghz, f"TR 38.901 applicability for {scenario}, GHz")


def _rma_environment(h_m: float, w_m: float) -> tuple[float, float]:
    why = "TR 38.901 Table 7.4.1-1, RMa"
    return (
        _scalar_in("h_m", h_m, RMA_BUILDING_HEIGHT_RANGE_M, f"average building height, {why}"),
        _scalar_in("w_m", w_m, RMA_STREET_WIDTH_RANGE_M, f"average street width, {why}"),
    )


# --------------------------------------------------------------------------- geometry


def distance_3d_m(d2d_m, h_bs_m: float, h_ut_m: float) -> np.ndarray:
    """d3D = sqrt(d2D^2 + (h_BS - h_UT)^2) (TR 38.901 Figure 7.4.1-1)."""
    d2d = np.asarray(d2d_m, dtype=float)
    return np.sqrt(d2d**2 + (h_bs_m - h_ut_m) ** 2)


def breakpoint_distance_m(scenario: str, fc_ghz: float, h_bs_m: float | None = None, h_ut_m: float = UT_DEFAULT_HEIGHT_M) -> float:
    """Breakpoint distance of the LOS model, in metres (TR 38.901 Table 7.4.1-1 Notes 1 and 5).

    * UMa, UMi: d'_BP = 4·h'_BS·h'_UT·f_c/c with h' = h - h_E and h_E = 1 m (for UMa
      the TR's random h_E is simplified to 1 m; see the module docstring).
    * RMa: d_BP = 2π·h_BS·h_UT·f_c/c.

    f_c in Hz inside the formula (``fc_ghz``·1e9).
    """
    fc_ghz = _frequency(scenario, fc_ghz)
    h_bs, h_ut = _heights(scenario, h_bs_m, h_ut_m)
    fc_hz = fc_ghz * 1e9
    if scenario == "RMa":
        return 2.0 * math.pi * h_bs * h_ut * fc_hz / SPEED_OF_LIGHT_M_S
    h_e = 1.0
    return 4.0 * (h_bs - h_e) * (h_ut - h_e) * fc_hz / SPEED_OF_LIGHT_M_S


# --------------------------------------------------------------------------- path loss


def _uma_los(d2d, d3d, fc, h_bs, h_ut, d_bp):
    pl1 = 28.0 + 22.0 * np.log10(d3d) + 20.0 * math.log10(fc)
    pl2 = 28.0 + 40.0 * np.log10(d3d) + 20.0 * math.log10(fc) - 9.0 * math.log10(d_bp**2 + (h_bs - h_ut) ** 2)
    return np.where(d2d <= d_bp, pl1, pl2)


def _uma_nlos_prime(d3d, fc, h_ut):
    return 13.54 + 39.08 * np.log10(d3d) + 20.0 * math.log10(fc) - 0.6 * (h_ut - 1.5)


def _umi_los(d2d, d3d, fc, h_bs, h_ut, d_bp):
    pl1 = 32.4 + 21.0 * np.log10(d3d) + 20.0 * math.log10(fc)
    pl2 = 32.4 + 40.0 * np.log10(d3d) + 20.0 * math.log10(fc) - 9.5 * math.log10(d_bp**2 + (h_bs - h_ut) ** 2)
    return np.where(d2d <= d_bp, pl1, pl2)


def _umi_nlos_prime(d3d, fc, h_ut):
    return 35.3 * np.log10(d3d) + 22.4 + 21.3 * math.log10(fc) - 0.3 * (h_ut - 1.5)


def _rma_pl1(d, fc, h):
    return (
        20.0 * np.log10(40.0 * math.pi * d * fc / 3.0)
        + min(0.03 * h**1.72, 10.0) * np.log10(d)
        - min(0.044 * h**1.72, 14.77)
        + 0.002 * math.log10(h) * d
    )


def _rma_los(d2d, d3d, fc, h, d_bp):
    # PL2 = PL1(d_BP) + 40·log10(d3D / d_BP): PL1 evaluated at the breakpoint distance,
    # as in Sionna and ns-3.
    pl2 = _rma_pl1(d_bp, fc, h) + 40.0 * np.log10(d3d / d_bp)
    return np.where(d2d <= d_bp, _rma_pl1(d3d, fc, h), pl2)


def _rma_nlos_prime(d3d, fc, h_bs, h_ut, h, w):
    return (
        161.04
        - 7.1 * math.log10(w)
        + 7.5 * math.log10(h)
        - (24.37 - 3.7 * (h / h_bs) ** 2) * math.log10(h_bs)
        + (43.42 - 3.1 * math.log10(h_bs)) * (np.log10(d3d) - 3.0)
        + 20.0 * math.log10(fc)
        - (3.2 * math.log10(11.75 * h_ut) ** 2 - 4.97)
    )


def path_loss_db(
    scenario: str,
    d2d_m,
    fc_ghz: float,
    los,
    *,
    h_bs_m: float | None = None,
    h_ut_m: float = UT_DEFAULT_HEIGHT_M,
    h_m: float = RMA_DEFAULT_BUILDING_HEIGHT_M,
    w_m: float = RMA_DEFAULT_STREET_WIDTH_M,
) -> np.ndarray:
    """Basic path loss in dB (no shadowing), TR 38.901 Table 7.4.1-1.

    ``d2d_m``: 2D (ground) distances, any shape; ``los``: a bool or a bool array
    broadcastable to it. NLOS users get ``max(PL_LOS, PL'_NLOS)`` as the table says.

    * UMa LOS: PL1 = 28.0 + 22·log10(d3D) + 20·log10(fc) for d2D <= d'_BP,
      PL2 = 28.0 + 40·log10(d3D) + 20·log10(fc) - 9·log10(d'_BP² + (h_BS - h_UT)²) beyond.
      UMa NLOS': 13.54 + 39.08·log10(d3D) + 20·log10(fc) - 0.6·(h_UT - 1.5).
    * UMi LOS: PL1 = 32.4 + 21·log10(d3D) + 20·log10(fc),
      PL2 = 32.4 + 40·log10(d3D) + 20·log10(fc) - 9.5·log10(d'_BP² + (h_BS - h_UT)²).
      UMi NLOS': 35.3·log10(d3D) + 22.4 + 21.3·log10(fc) - 0.3·(h_UT - 1.5).
    * RMa LOS: PL1 = 20·log10(40π·d3D·fc/3) + min(0.03h^1.72, 10)·log10(d3D)
      - min(0.044h^1.72, 14.77) + 0.002·log10(h)·d3D, PL2 = PL1(d_BP) + 40·log10(d3D/d_BP).
      RMa NLOS': 161.04 - 7.1·log10(W) + 7.5·log10(h) - (24.37 - 3.7(h/h_BS)²)·log10(h_BS)
      + (43.42 - 3.1·log10(h_BS))·(log10(d3D) - 3) + 20·log10(fc) - (3.2·(log10(11.75·h_UT))² - 4.97).

    ``h_bs_m`` defaults to the scenario's BS height (UMa 25 m, UMi 10 m, RMa 35 m);
    ``h_m`` and ``w_m`` (RMa's average building height and street width) are used
    by RMa only. Distance ranges: UMa, UMi and RMa NLOS 10 m-5 km; RMa LOS 10 m-10 km.
    """
    ranges = _scenario(scenario)
    fc = _frequency(scenario, fc_ghz)
    h_bs, h_ut = _heights(scenario, h_bs_m, h_ut_m)
    los_mask = np.asarray(los)
    if los_mask.dtype != bool:
        raise ValueError(f"los must be a bool or an array of bools, got dtype {los_mask.dtype}")
    d2d = np.asarray(d2d_m, dtype=float)
    los_mask = np.broadcast_to(los_mask, np.broadcast_shapes(los_mask.shape, d2d.shape))
    d2d = np.broadcast_to(d2d, los_mask.shape)
    table = f"TR 38.901 Table 7.4.1-1, {scenario}"
    _distances("d2d_m", d2d[los_mask], ranges.d2d_los_m, f"{table} LOS")
    _distances("d2d_m", d2d[~los_mask], ranges.d2d_nlos_m, f"{table} NLOS")
    d3d = distance_3d_m(d2d, h_bs, h_ut)
    d_bp = breakpoint_distance_m(scenario, fc, h_bs, h_ut)
    if scenario == "UMa":
        pl_los = _uma_los(d2d, d3d, fc, h_bs, h_ut, d_bp)
        pl_nlos = np.maximum(pl_los, _uma_nlos_prime(d3d, fc, h_ut))
    elif scenario == "UMi":
        pl_los = _umi_los(d2d, d3d, fc, h_bs, h_ut, d_bp)
        pl_nlos = np.maximum(pl_los, _umi_nlos_prime(d3d, fc, h_ut))
    else:
        h, w = _rma_environment(h_m, w_m)
        pl_los = _rma_los(d2d, d3d, fc, h, d_bp)
        pl_nlos = np.maximum(pl_los, _rma_nlos_prime(d3d, fc, h_bs, h_ut, h, w))
    return np.where(los_mask, pl_los, pl_nlos)


# --------------------------------------------------------------------------- LOS probability


def los_probability(scenario: str, d2d_m, h_ut_m: float = UT_DEFAULT_HEIGHT_M) -> np.ndarray:
    """Probability that an outdoor user at 2D distance d2D is in LOS, TR 38.901 Table 7.4.2-1.

    * RMa: 1 for d2D <= 10 m, else exp(-(d2D - 10)/1000).
    * UMi-Street Canyon: 1 for d2D <= 18 m, else 18/d2D + exp(-d2D/36)·(1 - 18/d2D).
    * UMa: 1 for d2D <= 18 m, else [18/d2D + exp(-d2D/63)·(1 - 18/d2D)]
      ·[1 + C'(h_UT)·(5/4)·(d2D/100)³·exp(-d2D/150)], with C'(h_UT) = 0 for
      h_UT <= 13 m and ((h_UT - 13)/10)^1.5 for 13 m < h_UT <= 23 m.

    Defined for any d2D > 0 (the probability, unlike the path loss, has no lower range).
    """
    ranges = _scenario(scenario)
    h_ut = _scalar_in("h_ut_m", h_ut_m, ranges.h_ut_m, f"TR 38.901 Table 7.4.1-1, {scenario}")
    d = np.asarray(d2d_m, dtype=float)
    if d.size and not np.all(d > 0):
        bad = d[~(d > 0)].flat[0]
        raise ValueError(f"d2d_m must be > 0 m (a 2D distance), got {bad:g}")
    with np.errstate(divide="ignore", invalid="ignore"):
        if scenario == "RMa":
            return np.where(d <= 10.0, 1.0, np.exp(-(d - 10.0) / 1000.0))
        if scenario == "UMi":
            return np.where(d <= 18.0, 1.0, 18.0 / d + np.exp(-d / 36.0) * (1.0 - 18.0 / d))
        c_prime = 0.0 if h_ut <= 13.0 else ((h_ut - 13.0) / 10.0) ** 1.5
        base = 18.0 / d + np.exp(-d / 63.0) * (1.0 - 18.0 / d)
        boost = 1.0 + c_prime * 1.25 * (d / 100.0) ** 3 * np.exp(-d / 150.0)
        return np.where(d <= 18.0, 1.0, base * boost)


# --------------------------------------------------------------------------- shadowing


def shadow_fading_std_db(
    scenario: str, d2d_m, fc_ghz: float, los, *, h_bs_m: float | None = None, h_ut_m: float = UT_DEFAULT_HEIGHT_M
) -> np.ndarray:
    """Shadow-fading standard deviation sigma_SF in dB per user, TR 38.901 Table 7.4.1-1.

    UMa 4 (LOS) / 6 (NLOS); UMi 4 / 7.82; RMa 4 up to the breakpoint distance d_BP and
    6 beyond it (LOS), 8 (NLOS).
    """
    _frequency(scenario, fc_ghz)
    _heights(scenario, h_bs_m, h_ut_m)
    los_mask = np.asarray(los)
    if los_mask.dtype != bool:
        raise ValueError(f"los must be a bool or an array of bools, got dtype {los_mask.dtype}")
    d2d = np.asarray(d2d_m, dtype=float)
    table = SHADOW_FADING_STD_DB[scenario]
    if scenario == "RMa":
        d_bp = breakpoint_distance_m(scenario, fc_ghz, h_bs_m, h_ut_m)
        sigma_los = np.where(d2d <= d_bp, table["los"], table["los_beyond_breakpoint"])
    else:
        sigma_los = np.full(d2d.shape, table["los"])
    return np.where(los_mask, sigma_los, table["nlos"])


@dataclass(frozen=True)
class LargeScale:
    """One drop's large-scale channel per user: path loss plus shadowing, the LOS state, sigma_SF."""

    loss_db: np.ndarray
    los: np.ndarray
    shadowing_db: np.ndarray
    sigma_db: np.ndarray


def draw_large_scale(
    scenario: str,
    d2d_m,
    fc_ghz: float,
    rng: np.random.Generator,
    *,
    h_bs_m: float | None = None,
    h_ut_m: float = UT_DEFAULT_HEIGHT_M,
    h_m: float = RMA_DEFAULT_BUILDING_HEIGHT_M,
    w_m: float = RMA_DEFAULT_STREET_WIDTH_M,
    los=None,
    shadowing: bool = True,
) -> LargeScale:
    """Draw each user's LOS state and log-normal shadowing, and return the total loss in dB.

    Draw order (fixed, so a seed reproduces a drop): one ``rng.random(n)`` for the LOS
    states (skipped when ``los`` is given), then one ``rng.standard_normal(n)`` for the
    shadowing (skipped when ``shadowing`` is False). LOS iff the uniform draw is below
    ``los_probability``. ``loss_db = path_loss_db + sigma_SF·N(0, 1)``.
    """
    d2d = np.asarray(d2d_m, dtype=float)
    if los is None:
        los = rng.random(d2d.shape) < los_probability(scenario, d2d, h_ut_m)
    else:
        los = np.broadcast_to(np.asarray(los), d2d.shape)
    basic = path_loss_db(scenario, d2d, fc_ghz, los, h_bs_m=h_bs_m, h_ut_m=h_ut_m, h_m=h_m, w_m=w_m)
    sigma = shadow_fading_std_db(scenario, d2d, fc_ghz, los, h_bs_m=h_bs_m, h_ut_m=h_ut_m)
    shadow = sigma * rng.standard_normal(d2d.shape) if shadowing else np.zeros(d2d.shape)
    return LargeScale(loss_db=basic + shadow, los=np.asarray(los), shadowing_db=shadow, sigma_db=sigma)
