"""Network profiles: validated, frozen descriptions of one system, and the paper presets.

The presets are the three systems of Fig. 3 in user-centric-fl.txt (Mestoukirdi et
al., "User-Centric Federated Learning", §IV-C).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .indoor import INDOOR_SCENARIOS
from .topology import Topology

SCHEDULES = ("phased", "pipelined")
DUPLEX_MODES = ("fdd", "tdd")
STREAM_ORDERS = ("plan", "largest_first")
BACKENDS = ("des", "analytic")
FADING_MODELS = ("rayleigh", "rician", "none")
PATH_LOSS_MODELS = ("log_distance", "UMa", "UMi", "RMa")
LINK_MODELS = ("shannon", "truncated_shannon", "nr")
MULTICAST_POLICIES = ("worst_user", "coverage")
UPLINK_ACCESS = ("orthogonal", "shared")
UL_SCHEDULERS = ("time_share", "equal_prb", "proportional_fair")
DROPS = ("per_profile", "common")
SUBBAND_MAPPINGS = ("mean", "eesm")
NR_SPACINGS_KHZ = (15, 30, 60)


def _number(field: str, value: Any) -> float:
    """Accept ints, floats and the strings 'inf'/'infinity' (YAML/JSON cannot spell infinity)."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a number, got {value!r}")
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity"):
        return math.inf
    if isinstance(value, (int, float)):
        number = float(value)
        if math.isnan(number):
            raise ValueError(f"{field} must be a number, got nan")
        return number
    raise ValueError(f"{field} must be a number, got {value!r}")


def _positive_finite(field: str, value: Any) -> float:
    number = _number(field, value)
    if not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{field} must be > 0, got {number}")
    return number


PHYSICAL_RANGES: dict[str, tuple[float, float, str]] = {
    "cell_radius_m": (1.0, 100_000.0, "from a 1 m picocell to a 100 km rural macro cell"),
    "min_distance_m": (0.1, 10_000.0, "the closest a user stands to the antenna"),
    "path_loss_exponent": (1.5, 8.0, "1.6-1.8 in corridors, 2 in free space, 2.7-6 in cities and buildings"),
    "reference_loss_db": (0.0, 150.0, "free space at 1 m is 22-72 dB from 300 MHz to 100 GHz"),
    "bs_power_dbm": (-30.0, 80.0, "20-30 dBm small cells, 43-49 dBm macro cells"),
    "ue_power_dbm": (-40.0, 40.0, "0-10 dBm IoT devices, 23-26 dBm phones"),
    "bandwidth_hz": (1e3, 1e10, "from a narrowband-IoT tone to a 10 GHz mmWave carrier"),
    "ul_bandwidth_hz": (1e3, 1e10, "as bandwidth_hz"),
    "noise_density_dbm_hz": (-200.0, -100.0, "thermal noise is -174 dBm/Hz, plus the receiver's noise figure"),
    "carrier_ghz": (0.5, 100.0, "TR 38.901's range; RMa stops at 30 GHz"),
    "k_factor_db": (-10.0, 30.0, "Rician K: 9 dB is TR 38.901's UMa LOS mean"),
    "coherence_s": (1e-5, 3600.0, "from a 10 us mmWave block to a static hour"),
    "ue_speed_mps": (0.0, 150.0, "still, walking 1.4 m/s, driving, high-speed train"),
    "coverage_q": (0.01, 1.0, "the share of a stream's receivers its rate serves"),
    "bs_antenna_gain_dbi": (0.0, 30.0, "0 dBi isotropic, 8 dBi one TR 38.901 element, 15-25 dBi a macro panel"),
    "ue_antenna_gain_dbi": (-10.0, 10.0, "0 dBi is TR 38.901's calibration UT; phones lose a few dB"),
    "noise_figure_bs_db": (0.0, 20.0, "5 dB is TR 38.901's calibration gNB receiver"),
    "noise_figure_ue_db": (0.0, 20.0, "9 dB is TR 38.901's calibration UT receiver"),
    "other_losses_db": (0.0, 40.0, "cable, body and other losses on the path, both directions"),
}
"""Plausible physical values, closed intervals: a value outside names its field and the range
(``path_loss_exponent: 1e6`` or ``ue_power_dbm: -1e300`` made rates of 0 and rounds of inf)."""

UL_ALPHAS = (0.0, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""TS 38.213's fractional path-loss compensation factors of PUSCH open-loop power control."""

LINK_BUDGET_FIELDS = ("bs_antenna_gain_dbi", "ue_antenna_gain_dbi", "noise_figure_bs_db", "noise_figure_ue_db", "other_losses_db")
"""The link budget beyond transmit powers and thermal noise: all 0 by default (the original model)."""

LINK_BUDGETS: dict[str, dict[str, float]] = {
    "tr38901-calibration": {
        "bs_power_dbm": 44.0,
        "ue_power_dbm": 23.0,
        "bs_antenna_gain_dbi": 8.0,
        "ue_antenna_gain_dbi": 0.0,
        "noise_figure_bs_db": 5.0,
        "noise_figure_ue_db": 9.0,
        "noise_density_dbm_hz": -174.0,
        "other_losses_db": 0.0,
    },
}
"""Named link budgets for ``physical.link_budget``. ``tr38901-calibration``: the system-level calibration
assumptions of 3GPP TR 38.901 Table 7.8-1 below 6 GHz (gNB transmit power 44 dBm over 20 MHz, gNB noise figure
5 dB, UT noise figure 9 dB, isotropic 0 dBi UT antenna) with the maximum gain of one antenna element of Table
7.3-1 (8 dBi) standing for the gNB antenna (no pattern, no array: the cell here has no sectors), and a power-class-3
phone (23 dBm, TS 38.101-1 §6.2.1)."""

NR_RANGES: dict[str, tuple[float, float, str]] = {
    "harq_rtt_ms": (0.0, 100.0, "NR's HARQ round trip is a few slots: 1-4 ms at 30 kHz"),
    "data_re_per_prb": (12.0, 168.0, "12 subcarriers x 14 symbols, less DMRS and control: 156 with one DMRS symbol"),
}
"""Plausible values of the ``physical.nr`` settings, closed intervals."""

PROFILE_LIMITS: dict[str, float] = {"rho": 1e6, "t_dl": 1e9, "t_min": 1e9, "channels": 100_000, "deadline": 1e12, "bits_per_parameter": 64}
"""Upper limits of the normalised fields (finite mu above 1e9 is refused too: use inf for exactly t_min)."""


def _in_range(field: str, value: Any) -> float:
    """A physical field's value within ``PHYSICAL_RANGES`` (``physical.nr.*``: ``NR_RANGES``)."""
    name = field.removeprefix("physical.")
    low, high, why = NR_RANGES[name.removeprefix("nr.")] if name.startswith("nr.") else PHYSICAL_RANGES[name]
    number = _number(field, value)
    if not low <= number <= high:
        raise ValueError(f"{field} must be in [{low:g}, {high:g}] ({why}), got {number:g}")
    return number


def _at_most(field: str, number: float, limit: float | None = None) -> None:
    limit = PROFILE_LIMITS[field.split("[")[0]] if limit is None else limit
    if number > limit:
        raise ValueError(f"{field} must be at most {limit:g}, got {number:g}")


def _choice(field: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{field} must be one of {options}, got {value!r}")
    return value


def _per_group(field: str, value: Any, check) -> float | tuple[float, ...]:
    """A float for every client, or a list with one value per client group."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{field} must be a number or a non-empty list of numbers, got []")
        return tuple(check(f"{field}[{i}]", v) for i, v in enumerate(value))
    return check(field, value)


def _t_min_value(field: str, value: Any) -> float:
    number = _number(field, value)
    if not (number >= 0 and math.isfinite(number)):
        raise ValueError(f"{field} must be >= 0 and finite, got {number}")
    _at_most(field, number)
    return number


def _mu_value(field: str, value: Any) -> float:
    number = _number(field, value)
    if not number > 0:
        raise ValueError(f"{field} must be > 0 (inf allowed), got {number}")
    if math.isfinite(number):
        _at_most(field, number, 1e9)
    return number


def _json_number(value: float) -> float | str:
    return "inf" if value == math.inf else value


def _check_keys(where: str, given: Mapping[str, Any], allowed: list[str]) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {where} keys {unknown}; allowed keys: {', '.join(allowed)}")


@dataclass(frozen=True)
class OllaSettings:
    """Outer-loop link adaptation of the uploads and of the downlink streams with one receiver (``nr.OllaLink``,
    Sionna SYS's ``OuterLoopLinkAdaptation``).

    Each block's MCS is the highest meeting ``physical.nr.bler_target`` at the SINR reported ``cqi_delay_blocks``
    blocks ago less an offset (dB) that starts at ``offset_init_db``, rises by ``delta_up_db`` on every NACK and falls
    by ``delta_up_db·target/(1 - target)`` on every ACK, within [``offset_min_db``, ``offset_max_db``] (Sionna's
    defaults: 1 dB, -20 dB, 20 dB), so the BLER target is met on average rather than in every block.
    """

    delta_up_db: float = 1.0
    cqi_delay_blocks: int = 0
    offset_init_db: float = 0.0
    offset_min_db: float = -20.0
    offset_max_db: float = 20.0

    def __post_init__(self) -> None:
        up = _number("physical.nr.olla.delta_up_db", self.delta_up_db)
        if not 0 < up <= 10:
            raise ValueError(f"physical.nr.olla.delta_up_db must be in (0, 10] dB (Sionna's default is 1), got {up:g}")
        object.__setattr__(self, "delta_up_db", up)
        delay = self.cqi_delay_blocks
        if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= 1000:
            raise ValueError(f"physical.nr.olla.cqi_delay_blocks must be an integer in [0, 1000] (fading blocks), got {delay!r}")
        for name in ("offset_init_db", "offset_min_db", "offset_max_db"):
            value = _number(f"physical.nr.olla.{name}", getattr(self, name))
            if not -100 <= value <= 100:
                raise ValueError(f"physical.nr.olla.{name} must be in [-100, 100] dB, got {value:g}")
            object.__setattr__(self, name, value)
        if not self.offset_min_db < self.offset_max_db:
            raise ValueError(f"physical.nr.olla.offset_min_db must be below offset_max_db, got {self.offset_min_db:g} and {self.offset_max_db:g}")
        if not self.offset_min_db <= self.offset_init_db <= self.offset_max_db:
            raise ValueError(f"physical.nr.olla.offset_init_db must be in [offset_min_db, offset_max_db], got {self.offset_init_db:g}")

    @classmethod
    def from_dict(cls, values: Any) -> OllaSettings:
        if isinstance(values, OllaSettings):
            return values
        if not isinstance(values, Mapping):
            raise ValueError(f"physical.nr.olla must be a mapping of outer-loop link adaptation settings (or null), got {values!r}")
        _check_keys("physical.nr.olla", values, [f.name for f in fields(cls)])
        return cls(**dict(values))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class NrSettings:
    """The 5G NR link of ``link: nr`` (``network/nr.py``: Sionna SYS tables, TS 38.214 MCS and TBS).

    ``subcarrier_spacing_khz`` and the profile's bandwidths give each carrier's PRBs
    (TS 38.101-1) and the slot; ``mcs_table`` 1 (up to 64QAM) or 2 (256QAM) serves both
    directions; the MCS of each fading block is the highest meeting ``bler_target``;
    ``harq_retransmissions`` Chase-combined retransmissions per TB, the last TB's
    costing ``harq_rtt_ms`` each at the end of a transfer. ``olla``: the uploads' (and one-receiver streams') MCS
    from a stale SINR report and an outer-loop offset (``OllaSettings``) instead of the block's own SINR.
    """

    subcarrier_spacing_khz: int = 30
    mcs_table: int = 1
    bler_target: float = 0.1
    harq_retransmissions: int = 3
    harq_rtt_ms: float = 2.0
    data_re_per_prb: int = 156
    olla: OllaSettings | None = None

    def __post_init__(self) -> None:
        if self.subcarrier_spacing_khz not in NR_SPACINGS_KHZ:
            raise ValueError(f"physical.nr.subcarrier_spacing_khz must be one of {', '.join(map(str, NR_SPACINGS_KHZ))} (FR1), got {self.subcarrier_spacing_khz!r}")
        if self.mcs_table not in (1, 2) or isinstance(self.mcs_table, bool):
            raise ValueError(f"physical.nr.mcs_table must be 1 (64QAM) or 2 (256QAM), got {self.mcs_table!r}")
        target = _number("physical.nr.bler_target", self.bler_target)
        if not 0 < target < 1:
            raise ValueError(f"physical.nr.bler_target must be in (0, 1) (a transport-block error rate; 0.1 is usual), got {target:g}")
        object.__setattr__(self, "bler_target", target)
        retx = self.harq_retransmissions
        if isinstance(retx, bool) or not isinstance(retx, int) or not 0 <= retx <= 8:
            raise ValueError(f"physical.nr.harq_retransmissions must be an integer in [0, 8] (NR allows up to 3 or 4), got {retx!r}")
        object.__setattr__(self, "harq_rtt_ms", _in_range("physical.nr.harq_rtt_ms", self.harq_rtt_ms))
        re = _in_range("physical.nr.data_re_per_prb", self.data_re_per_prb)
        if re != int(re):
            raise ValueError(f"physical.nr.data_re_per_prb must be a whole number of resource elements, got {re:g}")
        object.__setattr__(self, "data_re_per_prb", int(re))
        if self.olla is not None:
            object.__setattr__(self, "olla", OllaSettings.from_dict(self.olla))

    @classmethod
    def from_dict(cls, values: Any) -> NrSettings:
        if isinstance(values, NrSettings):
            return values
        if not isinstance(values, Mapping):
            raise ValueError(f"physical.nr must be a mapping of NR link settings, got {values!r}")
        _check_keys("physical.nr", values, [f.name for f in fields(cls)])
        return cls(**dict(values))

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["olla"] = None if self.olla is None else self.olla.to_dict()
        return out


@dataclass(frozen=True)
class PhysicalChannel:
    """A single cell: users dropped uniformly in an annulus, log-distance path loss,
    Rayleigh block fading redrawn every round, Shannon rates.

    Distances in metres, powers in dBm, bandwidths in Hz, noise density in dBm/Hz.
    ``reference_loss_db`` is the path loss at 1 m; the loss at distance d is
    ``reference_loss_db + 10·path_loss_exponent·log10(d / 1 m)``.
    ``ul_bandwidth_hz`` is the bandwidth of *each* uplink channel (default: the
    downlink bandwidth), so that, as in normalised mode, every channel carries a
    full-rate upload.

    Standard channels (``network/pathloss.py``, ``network/link.py``; the defaults
    keep the model above, so old scenarios time identically):

    * ``path_loss_model``: ``log_distance`` (above) or TR 38.901 ``UMa``, ``UMi``
      (street canyon), ``RMa`` at ``carrier_ghz``, each user's LOS state drawn
      from the TR's LOS probability and, with ``shadowing``, log-normal
      shadowing with the TR's standard deviation (drawn once per drop).
    * ``fading``: ``rayleigh``, ``rician`` (``k_factor_db``) or ``none``.
    * ``coherence_s`` (or ``ue_speed_mps`` at ``carrier_ghz``, T_c = 0.423/f_D):
      a transfer is cut into blocks of that length with independent fading, so
      a long transfer sees the ergodic rate and a short one the block rate.
      Unset: one draw per user per round, held for the whole transfer.
    * ``link``: ``shannon``, ``truncated_shannon`` (TR 36.942 annex A) or ``nr``
      (5G NR: MCS per block for a BLER target, block errors, HARQ; ``nr`` settings).
    * ``uplink``: ``orthogonal`` (each of the profile's ``channels`` is a full
      ``ul_bandwidth_hz`` pipe) or ``shared`` (one uplink carrier that every
      concurrent uploader shares equally, ``channels`` must be 1).
    * ``drop``: ``per_profile`` (each profile draws its own users) or ``common``
      (every ``common`` profile of a run places the same users, from the seed alone).
    * ``multicast``: ``worst_user`` (every block at the weakest receiver's rate) or
      ``coverage`` (the ``coverage_q`` quantile receiver's rate; with block
      fading only).
    * ``ul_sinr_threshold_db``: an upload whose SINR in the round is below this
      threshold cannot be decoded and is not sent (rate 0: it never arrives), the
      success model of Yang, Liu, Quek, Poor (IEEE TCOM 2020); fading held for the
      round, ``shannon`` or ``truncated_shannon`` links. Unset: no threshold.
    """

    cell_radius_m: float = 250.0
    min_distance_m: float = 10.0
    path_loss_exponent: float = 3.5
    reference_loss_db: float = 38.5
    fading: str = "rayleigh"
    bs_power_dbm: float = 43.0
    ue_power_dbm: float = 23.0
    bandwidth_hz: float = 10e6
    ul_bandwidth_hz: float | None = None
    noise_density_dbm_hz: float = -174.0
    path_loss_model: str = "log_distance"
    carrier_ghz: float = 3.5
    shadowing: bool = True
    k_factor_db: float = 9.0
    coherence_s: float | None = None
    ue_speed_mps: float | None = None
    link: str = "shannon"
    multicast: str = "worst_user"
    coverage_q: float = 1.0
    uplink: str = "orthogonal"
    nr: NrSettings | None = None
    drop: str = "per_profile"
    bs_antenna_gain_dbi: float = 0.0
    ue_antenna_gain_dbi: float = 0.0
    noise_figure_bs_db: float = 0.0
    noise_figure_ue_db: float = 0.0
    other_losses_db: float = 0.0
    topology: Topology | None = None
    ul_p0_dbm: float | None = None
    ul_alpha: float = 1.0
    tdd_pattern: str | None = None
    tdd_special_symbols: tuple[int, int, int] = (10, 2, 2)
    subbands: int = 1
    subband_mapping: str = "mean"
    ul_sinr_threshold_db: float | None = None
    ul_scheduler: str = "time_share"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name in ("min_distance_m", "cell_radius_m", "path_loss_exponent", "reference_loss_db", "bs_power_dbm",
                     "ue_power_dbm", "bandwidth_hz", "noise_density_dbm_hz", *LINK_BUDGET_FIELDS):
            set_(self, name, _in_range(f"physical.{name}", getattr(self, name)))
        if self.cell_radius_m <= self.min_distance_m:
            raise ValueError(
                f"physical.cell_radius_m must be > physical.min_distance_m ({self.min_distance_m}), got {self.cell_radius_m}"
            )
        _choice("physical.fading", self.fading, FADING_MODELS)
        if self.ul_bandwidth_hz is not None:
            set_(self, "ul_bandwidth_hz", _in_range("physical.ul_bandwidth_hz", self.ul_bandwidth_hz))
        _choice("physical.path_loss_model", self.path_loss_model, PATH_LOSS_MODELS)
        _choice("physical.link", self.link, LINK_MODELS)
        _choice("physical.multicast", self.multicast, MULTICAST_POLICIES)
        _choice("physical.uplink", self.uplink, UPLINK_ACCESS)
        _choice("physical.drop", self.drop, DROPS)
        if self.ul_scheduler not in UL_SCHEDULERS:
            raise ValueError(
                f"physical.ul_scheduler must be one of {', '.join(repr(s) for s in UL_SCHEDULERS)} (time_share: each uploader "
                f"has the whole carrier in turn; equal_prb: each holds an equal share of its PRBs; proportional_fair: PRBs by "
                f"Sionna's PF metric), got {self.ul_scheduler!r}"
            )
        if self.ul_scheduler != "time_share" and self.uplink != "shared":
            raise ValueError(f"physical.ul_scheduler {self.ul_scheduler!r} needs physical.uplink 'shared' (one carrier whose PRBs the uploaders share), got {self.uplink!r}")
        if self.topology is not None:
            set_(self, "topology", Topology.from_dict(self.topology))
        if self.ul_p0_dbm is not None:
            p0 = _number("physical.ul_p0_dbm", self.ul_p0_dbm)
            if not -202.0 <= p0 <= 24.0:
                raise ValueError(f"physical.ul_p0_dbm must be in [-202, 24] dBm (TS 38.213's P_O_PUSCH range; null: every phone at full power), got {p0:g}")
            set_(self, "ul_p0_dbm", p0)
        self._check_tdd()
        if isinstance(self.ul_alpha, bool) or self.ul_alpha not in UL_ALPHAS:
            raise ValueError(f"physical.ul_alpha must be one of {', '.join(f'{a:g}' for a in UL_ALPHAS)} (TS 38.213's alpha), got {self.ul_alpha!r}")
        set_(self, "ul_alpha", float(self.ul_alpha))
        if self.nr is not None:
            set_(self, "nr", NrSettings.from_dict(self.nr))
        if self.link == "nr":
            set_(self, "nr", self.nr or NrSettings())
            self._check_nr_carriers()
        elif self.nr is not None:
            raise ValueError(f"physical.nr applies to link 'nr' only, but link is {self.link!r}")
        if not isinstance(self.shadowing, bool):
            raise ValueError(f"physical.shadowing must be true or false, got {self.shadowing!r}")
        for name in ("carrier_ghz", "k_factor_db", "coverage_q"):
            set_(self, name, _in_range(f"physical.{name}", getattr(self, name)))
        for name in ("coherence_s", "ue_speed_mps"):
            if getattr(self, name) is not None:
                set_(self, name, _in_range(f"physical.{name}", getattr(self, name)))
        if self.coherence_s is not None and self.ue_speed_mps is not None:
            raise ValueError("physical: give coherence_s or ue_speed_mps (which sets it from the Doppler shift), not both")
        if isinstance(self.subbands, bool) or not isinstance(self.subbands, int) or not 1 <= self.subbands <= 275:
            raise ValueError(f"physical.subbands must be a whole number in [1, 275] (1: flat fading over the carrier; at most its PRBs), got {self.subbands!r}")
        if self.subband_mapping not in SUBBAND_MAPPINGS:
            raise ValueError(
                f"physical.subband_mapping must be one of {', '.join(repr(m) for m in SUBBAND_MAPPINGS)} "
                f"(mean: each subband at its own efficiency; eesm: one MCS per transport block), got {self.subband_mapping!r}"
            )
        if self.subband_mapping == "eesm" and self.link != "nr":
            raise ValueError(f"physical.subband_mapping 'eesm' needs link 'nr' (its beta is per NR MCS), got link {self.link!r}")
        if self.subbands > 1 and self.block_s is None:
            raise ValueError("physical.subbands > 1 needs block fading: set coherence_s or ue_speed_mps")
        if self.topology is not None and self.topology.has_user_states and self.path_loss_model not in INDOOR_SCENARIOS:
            field = "indoor_fraction" if self.topology.indoor_fraction > 0.0 else "ut_height"
            raise ValueError(
                f"physical.topology.{field} needs path_loss_model 'UMa' or 'UMi' (TR 38.901's O2I loss and floors are "
                f"theirs), got {self.path_loss_model!r}"
            )
        if self.topology is not None and self.topology.interference == "faded" and (self.block_s is None or self.fading == "none"):
            raise ValueError("physical.topology.interference 'faded' needs block fading (set coherence_s or ue_speed_mps) and fading other than 'none'")
        if self.nr is not None and self.nr.olla is not None and (self.block_s is None or self.fading == "none"):
            raise ValueError("physical.nr.olla needs block fading: set coherence_s or ue_speed_mps and fading other than 'none'")
        if self.nr is not None and self.nr.olla is not None and self.subbands > 1 and self.subband_mapping != "eesm":
            raise ValueError(
                "physical.nr.olla with subbands > 1 needs subband_mapping 'eesm' (one MCS per transport block, whose "
                f"effective SINR the loop reports), got {self.subband_mapping!r}"
            )
        if self.multicast == "coverage" and self.block_s is None:
            raise ValueError("physical.multicast 'coverage' needs block fading: set coherence_s or ue_speed_mps")
        self._check_sinr_threshold()
        if self.path_loss_model == "RMa" and self.carrier_ghz > 30.0:
            raise ValueError(f"physical.carrier_ghz must be at most 30 for path_loss_model RMa (TR 38.901), got {self.carrier_ghz:g}")

    def _check_sinr_threshold(self) -> None:
        threshold = self.ul_sinr_threshold_db
        if threshold is None:
            return
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise ValueError(f"physical.ul_sinr_threshold_db must be a finite number of dB (leave it out for no threshold), got {threshold!r}")
        if self.block_s is not None or self.link == "nr":
            raise ValueError(
                "physical.ul_sinr_threshold_db needs fading held for the round (coherence_s and ue_speed_mps unset) and "
                f"link shannon or truncated_shannon (nr has its own outage), got {'block fading' if self.block_s is not None else 'link nr'}"
            )
        object.__setattr__(self, "ul_sinr_threshold_db", float(threshold))

    def _check_tdd(self) -> None:
        special = self.tdd_special_symbols
        if (not isinstance(special, (list, tuple)) or len(special) != 3
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in special) or sum(special) != 14):
            raise ValueError(
                "physical.tdd_special_symbols must be three whole numbers of OFDM symbols [downlink, guard, uplink] "
                f"adding up to the slot's 14 (10, 2, 2 is common), got {special!r}"
            )
        object.__setattr__(self, "tdd_special_symbols", tuple(special))
        pattern = self.tdd_pattern
        if pattern is None:
            return
        if not isinstance(pattern, str) or not 1 <= len(pattern) <= 20 or set(pattern) - set("DSU"):
            raise ValueError(f"physical.tdd_pattern must be 1-20 slots of D, S and U (DDDSU is common at 3.5 GHz), got {pattern!r}")
        if self.time_share("ul") == 0:
            raise ValueError(f"physical.tdd_pattern {pattern!r} has no uplink slot (U) or uplink symbol in its special slots (S)")
        if self.time_share("dl") == 0:
            raise ValueError(f"physical.tdd_pattern {pattern!r} has no downlink slot (D) or downlink symbol in its special slots (S)")

    def time_share(self, direction: str) -> float:
        """The share of the carrier's time a direction gets: 1 without ``tdd_pattern``; with it, that
        direction's slots and symbols of the special slots over the pattern's (14 symbols a slot)."""
        if self.tdd_pattern is None:
            return 1.0
        full, special = ("D", 0) if direction == "dl" else ("U", 2)
        symbols = 14 * self.tdd_pattern.count(full) + self.tdd_special_symbols[special] * self.tdd_pattern.count("S")
        return symbols / (14 * len(self.tdd_pattern))

    def _check_nr_carriers(self) -> None:
        from .nr import prbs_for

        spacing = self.nr.subcarrier_spacing_khz
        for name, hz in (("bandwidth_hz", self.bandwidth_hz), ("ul_bandwidth_hz", self.uplink_bandwidth_hz)):
            try:
                prbs_for(hz, spacing)
            except ValueError as error:
                raise ValueError(f"physical.{name}: {error}") from None

    def summary(self) -> str:
        """One line naming the channel and link models, for summary.md's notes."""
        if self.path_loss_model == "log_distance":
            loss = f"log-distance path loss (exponent {self.path_loss_exponent:g})"
        else:
            loss = f"TR 38.901 {self.path_loss_model} at {self.carrier_ghz:g} GHz ({'with' if self.shadowing else 'no'} shadowing)"
        fading = {"rayleigh": "Rayleigh", "rician": f"Rician K = {self.k_factor_db:g} dB", "none": "no"}[self.fading] + " fading"
        block = self.block_s
        if self.fading == "none":
            held = ""
        elif block is None:
            held = ", one draw per round"
        else:
            speed = f" ({self.ue_speed_mps:g} m/s)" if self.coherence_s is None else ""
            held = f" in {1e3 * block:.3g} ms blocks{speed}" + (f" over {self.subbands} subbands" if self.subbands > 1 else "")
            held += " (EESM)" if self.subbands > 1 and self.subband_mapping == "eesm" else ""
        link = {"shannon": "Shannon", "truncated_shannon": "TR 36.942 truncated Shannon"}.get(self.link)
        if self.link == "nr":
            nr = self.nr
            from .nr import sionna_version

            link = (
                f"5G NR (Sionna SYS {sionna_version()}, MCS table {nr.mcs_table}, BLER target {nr.bler_target:g}, "
                f"{nr.harq_retransmissions} HARQ retransmissions, {nr.subcarrier_spacing_khz} kHz)"
            )
        multicast = "worst-user multicast" if self.multicast == "worst_user" else f"coverage multicast (q = {self.coverage_q:g}, unicast repairs)"
        cell = f"cell {self.min_distance_m:g}-{self.cell_radius_m:g} m"
        if self.topology is not None:
            t = self.topology
            cell = (
                f"{t.num_sites} sites x {t.sectors} sector{'s' if t.sectors > 1 else ''} at {t.isd_m:g} m ISD"
                f"{' with wraparound' if t.wraparound else ''}, neighbours at load {t.load:g}"
                f"{' (interference faded per block)' if t.interference == 'faded' else ''}"
                f"{f', {t.indoor_fraction:.0%} indoor users ({t.o2i} O2I loss)' if t.indoor_fraction > 0 else ''}"
                f"{', indoor users on TR 36.873 floors' if t.ut_height == 'floors' else ''}"
                f"{f', {t.bs_rows}-element vertical arrays' if t.bs_rows > 1 else ''}, users of "
                + ("the centre site" if t.users == "center" else "every site")
            )
        return (
            f"{cell}, {loss}, {fading}{held}, {link} rates, "
            f"{self.bandwidth_hz / 1e6:g} MHz, {multicast}"
            + (", one uplink carrier shared equally by concurrent uploaders" if self.uplink == "shared" else "")
            + ({"equal_prb": " in equal PRB shares", "proportional_fair": " in proportional-fair PRB shares"}.get(self.ul_scheduler, "")
               + (" with open-loop power control per share" if self.ul_scheduler != "time_share" else ""))
            + (f", TDD {self.tdd_pattern} (downlink {self.time_share('dl'):.0%}, uplink {self.time_share('ul'):.0%} of the time)"
               if self.tdd_pattern is not None else "")
            + (f", uploads below {self.ul_sinr_threshold_db:g} dB SINR lost" if self.ul_sinr_threshold_db is not None else "")
        )

    @property
    def block_s(self) -> float | None:
        """The fading block length in seconds: ``coherence_s``, or Clarke's 0.423/f_D from the speed; None for one
        draw per round (also at speed 0, where the channel never changes)."""
        if self.coherence_s is not None:
            return self.coherence_s
        if self.ue_speed_mps:
            from .link import coherence_time_s

            return float(coherence_time_s(self.ue_speed_mps, self.carrier_ghz))
        return None

    @property
    def uplink_bandwidth_hz(self) -> float:
        return self.bandwidth_hz if self.ul_bandwidth_hz is None else self.ul_bandwidth_hz

    def radiated_dbm(self, direction: str) -> float:
        """The transmit power of a direction (``dl``: the gNB's, ``ul``: the phone's) plus both antenna gains, less
        ``other_losses_db``: what the path loss is taken from. Exactly the transmit power with the default budget."""
        power = self.bs_power_dbm if direction == "dl" else self.ue_power_dbm
        return power + self.bs_antenna_gain_dbi + self.ue_antenna_gain_dbi - self.other_losses_db

    def uplink_power_dbm(self, coupling_loss_db):
        """Each phone's PUSCH power from TS 38.213 §7.1.1's open loop, min(P_max, P0 + 10·log10(2^μ·M_RB) +
        α·PL), with 2^μ·M_RB taken as the uplink bandwidth over 180 kHz and PL the coupling loss less both
        antenna gains and plus other losses (what a phone measures on the downlink reference signals);
        ``ue_power_dbm`` for every phone without ``ul_p0_dbm``."""
        loss = np.asarray(coupling_loss_db, dtype=float)
        if self.ul_p0_dbm is None:
            return np.full(loss.shape, self.ue_power_dbm)
        measured = loss - self.bs_antenna_gain_dbi - self.ue_antenna_gain_dbi + self.other_losses_db
        wanted = self.ul_p0_dbm + 10.0 * np.log10(self.uplink_bandwidth_hz / 180e3) + self.ul_alpha * measured
        return np.minimum(self.ue_power_dbm, wanted)

    def noise_dbm_hz(self, direction: str) -> float:
        """The receiver's noise density of a direction: thermal density plus the receiving side's noise figure
        (the phone's on the downlink, the gNB's on the uplink)."""
        return self.noise_density_dbm_hz + (self.noise_figure_ue_db if direction == "dl" else self.noise_figure_bs_db)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> PhysicalChannel:
        """Build from plain data; ``link_budget: <name>`` starts from a ``LINK_BUDGETS`` preset's values,
        which the other keys override."""
        if not isinstance(values, Mapping):
            raise ValueError(f"physical must be a mapping of channel settings or null, got {values!r}")
        _check_keys("physical", values, [*(f.name for f in fields(cls)), "link_budget"])
        merged = dict(values)
        if "link_budget" in merged:
            name = merged.pop("link_budget")
            if name not in LINK_BUDGETS:
                raise ValueError(f"physical.link_budget must be one of {', '.join(repr(b) for b in LINK_BUDGETS)}, got {name!r}")
            merged = {**LINK_BUDGETS[name], **merged}
        return cls(**merged)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["nr"] = None if self.nr is None else self.nr.to_dict()
        out["topology"] = None if self.topology is None else self.topology.to_dict()
        out["tdd_special_symbols"] = list(self.tdd_special_symbols)
        if self.subband_mapping == "mean":  # the default is left out, so profiles written before it keep their fingerprint
            del out["subband_mapping"]
        if self.ul_sinr_threshold_db is None:  # absent unless set, so profiles without it resolve (and fingerprint) as before
            del out["ul_sinr_threshold_db"]
        if self.ul_scheduler == "time_share":  # the default is left out, as above
            del out["ul_scheduler"]
        return out


@dataclass(frozen=True)
class SystemProfile:
    """One network profile. Times share one unit: with ``t_dl = 1`` it is T_dl.

    * ``rho`` = T_ul / T_dl: an upload of payload p lasts ``p·rho·t_dl``.
    * Compute time of client i: ``T_i = t_min_i + Exp(mu_i)`` (mean ``t_min + 1/mu``),
      ``mu = inf`` means exactly ``t_min``. ``t_min`` and ``mu`` are each a number
      (every client) or a list with one value per client *group*: with G values and
      n clients, client i is in group ``i·G // n`` (contiguous equal blocks; G = n
      gives one value per client). With ``scale_compute_with_work`` the draw is
      multiplied by the client's relative local work from the plan.
    * ``channels`` orthogonal uplink channels (1 = TDMA in order of finishing).
    * ``schedule``: ``phased`` (downlink phase, compute, uplink phase after the
      slowest client) or ``pipelined`` (event-driven overlap; ``duplex`` decides
      whether downlink and uplink may overlap: ``fdd`` yes, ``tdd`` no).
    * ``deadline``: round length limit; see the package docstring for who misses it.
    * ``backend``: ``des`` (SimPy, random draws) or ``analytic`` (the paper's
      closed-form expected round time; phased, no deadline, no physical channel).
    * ``physical``: if set, durations come from Shannon rates in seconds and
      ``rho``/``t_dl`` are not used (``rho`` may then be left out: None).
    """

    name: str
    rho: float | None = None
    t_dl: float = 1.0
    t_min: float | tuple[float, ...] = 1.0
    mu: float | tuple[float, ...] = math.inf
    scale_compute_with_work: bool = False
    channels: int = 1
    schedule: str = "phased"
    duplex: str = "fdd"
    stream_order: str = "plan"
    deadline: float | None = None
    backend: str = "des"
    physical: PhysicalChannel | None = None
    bits_per_parameter: int = 32
    description: str = ""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if self.rho is None:
            if self.physical is None:
                raise ValueError("profile needs 'rho' (T_ul / T_dl), or a 'preset' that sets it, or a 'physical' channel")
        else:
            set_(self, "rho", _positive_finite("rho", self.rho))
            _at_most("rho", self.rho)
        set_(self, "t_dl", _positive_finite("t_dl", self.t_dl))
        _at_most("t_dl", self.t_dl)
        set_(self, "t_min", _per_group("t_min", self.t_min, _t_min_value))
        set_(self, "mu", _per_group("mu", self.mu, _mu_value))
        if isinstance(self.t_min, tuple) and isinstance(self.mu, tuple) and len(self.t_min) != len(self.mu):
            raise ValueError(
                f"t_min and mu lists must have the same number of groups, got {len(self.t_min)} and {len(self.mu)}"
            )
        if not isinstance(self.scale_compute_with_work, bool):
            raise ValueError(f"scale_compute_with_work must be true or false, got {self.scale_compute_with_work!r}")
        if isinstance(self.channels, bool) or not isinstance(self.channels, int) or self.channels < 1:
            raise ValueError(f"channels must be an integer >= 1, got {self.channels!r}")
        _at_most("channels", self.channels)
        if isinstance(self.physical, PhysicalChannel) and self.physical.uplink == "shared" and self.channels != 1:
            raise ValueError(
                f"channels must be 1 with physical.uplink 'shared' (one carrier shared by every uploader), got {self.channels}"
            )
        _choice("schedule", self.schedule, SCHEDULES)
        _choice("duplex", self.duplex, DUPLEX_MODES)
        _choice("stream_order", self.stream_order, STREAM_ORDERS)
        if self.deadline is not None:
            deadline = _number("deadline", self.deadline)
            if not (deadline > 0 and math.isfinite(deadline)):
                raise ValueError(f"deadline must be > 0 and finite, or null for no deadline, got {deadline}")
            _at_most("deadline", deadline)
            set_(self, "deadline", deadline)
        _choice("backend", self.backend, BACKENDS)
        if self.physical is not None and not isinstance(self.physical, PhysicalChannel):
            raise ValueError(f"physical must be a PhysicalChannel or None, got {self.physical!r}")
        if (
            isinstance(self.bits_per_parameter, bool)
            or not isinstance(self.bits_per_parameter, int)
            or self.bits_per_parameter < 1
        ):
            raise ValueError(f"bits_per_parameter must be an integer >= 1, got {self.bits_per_parameter!r}")
        _at_most("bits_per_parameter", self.bits_per_parameter)
        if not isinstance(self.description, str):
            raise ValueError(f"description must be a string, got {self.description!r}")
        if self.backend == "analytic":
            if self.schedule != "phased":
                raise ValueError("backend 'analytic' needs schedule 'phased' (the closed form is for phased rounds)")
            if self.deadline is not None:
                raise ValueError("backend 'analytic' does not support a deadline; use backend 'des'")
            if self.physical is not None:
                raise ValueError("backend 'analytic' does not support a physical channel; use backend 'des'")

    @property
    def time_unit(self) -> str:
        return "s" if self.physical is not None else "T_dl"

    @property
    def compute_groups(self) -> int:
        """Number of compute groups (1 when t_min and mu are plain numbers)."""
        for value in (self.t_min, self.mu):
            if isinstance(value, tuple):
                return len(value)
        return 1

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SystemProfile:
        """Build from plain data (YAML/JSON). ``preset: <name>`` starts from a preset;
        the other keys override its fields (``physical`` is replaced as a whole)."""
        if not isinstance(values, Mapping):
            raise ValueError(f"a profile must be a mapping of fields, got {values!r}")
        allowed = [f.name for f in fields(cls)]
        _check_keys("profile", values, ["preset", *allowed])
        merged: dict[str, Any] = {}
        if "preset" in values:
            preset = values["preset"]
            if preset not in PRESETS:
                raise ValueError(f"preset must be one of {', '.join(repr(p) for p in PRESETS)}, got {preset!r}")
            merged = PRESETS[preset].to_dict()
        merged.update({k: v for k, v in values.items() if k != "preset"})
        if "name" not in merged:
            raise ValueError("profile needs a 'name' (or a 'preset' to take the name from)")
        if "rho" not in merged and merged.get("physical") is None:
            raise ValueError("profile needs 'rho' (T_ul / T_dl), or a 'preset' that sets it, or a 'physical' channel")
        for key in ("t_min", "mu"):
            if isinstance(merged.get(key), list):
                merged[key] = tuple(merged[key])
        if merged.get("physical") is not None:
            physical = merged["physical"]
            merged["physical"] = physical if isinstance(physical, PhysicalChannel) else PhysicalChannel.from_dict(physical)
        return cls(**merged)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (infinity written as the string 'inf'); ``from_dict`` inverts it."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("t_min", "mu"):
            value = out[key]
            out[key] = [_json_number(v) for v in value] if isinstance(value, tuple) else _json_number(value)
        out["physical"] = None if self.physical is None else self.physical.to_dict()
        return out


_WHY_PHASED = (
    " Phased rounds with one uplink channel (serialized uploads), because the paper's"
    " claims hold only there: extra downlink streams are negligible when rho is large"
    " (k=100 streams cost +24% at rho=4) but k must be chosen when rho is in [1, 2]"
    " (+97% at rho=1); with one shared parallel uplink phase k=100 costs ~10x at rho=4,"
    " and with pipelining the extra streams are free."
)

PRESETS: dict[str, SystemProfile] = {
    profile.name: profile
    for profile in (
        SystemProfile(
            name="slow-ul-unreliable",
            rho=4.0,
            t_min=1.0,
            mu=1.0,
            description="Fig. 3 system 1: slow uplink (rho=4) and unreliable nodes (T_min = T_dl = 1/mu)." + _WHY_PHASED,
        ),
        SystemProfile(
            name="fast-ul-reliable",
            rho=2.0,
            t_min=1.0,
            mu=math.inf,
            description="Fig. 3 system 2: fast uplink (rho=2) and reliable nodes (T_min = T_dl, 1/mu = 0)." + _WHY_PHASED,
        ),
        SystemProfile(
            name="wired",
            rho=1.0,
            t_min=1.0,
            mu=math.inf,
            description="Fig. 3 system 3: wired, symmetric links (rho=1), reliable nodes (T_min = T_dl, 1/mu = 0)."
            + _WHY_PHASED,
        ),
    )
}
