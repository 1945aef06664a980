"""A hexagonal multi-cell layout: neighbour cells, sectors and the interference they cause, pure numpy.

``physical.topology`` replaces the single cell with the layout of 3GPP TR 38.901 §7.8's system-level
calibration: sites on a hexagonal grid (``rings`` 0, 1 or 2 around the centre: 1, 7 or 19 sites) ``isd_m``
apart, numbered in the TR's spiral order; one omnidirectional cell or three sectors a site (boresights 30°,
150°, 270°) with the antenna element pattern of TR 38.901 Table 7.3-1; wraparound, so that every user sees
the layout from its centre (each site at its nearest image under the layout's translations). The site
positions and wraparound vectors equal those of Sionna SYS's ``gen_tr38901_multicell_topology``
(``tests/network/test_topology.py`` compares them in a child process; the network side imports no torch,
so they are computed here).

The federation's users are dropped uniformly over the centre site's hexagon (``users: center``: one site's
users train together) or over every site's (``users: all``: every cell's users report to one server), at
least ``min_distance_m`` from every site. Each user is served by the sector of least coupling loss (path
loss, LOS state and shadowing drawn per user and site, less the sector's antenna pattern). The other sectors
transmit with probability ``load`` (their activity factor): on the downlink each adds ``load`` times its
received power to the user's noise; on the uplink each holds one active phone, dropped uniformly over its
own sector and sending at full power, whose power at the user's serving sector adds ``load`` times itself.
Interference is its mean over small-scale fading (the geometry SINR of TR 38.901 §7.8): the user's own
signal fades block by block, its interferers' sum does not. With ``physical.ul_p0_dbm`` every phone,
interferers included, sends at its open-loop PUSCH power (``PhysicalChannel.uplink_power_dbm``).

Opt-in, for TR 38.901 Table 7.8-1's calibration (``CALIBRATION``): indoor users and phones with the O2I loss and
floors of ``network/indoor.py`` (``indoor_fraction``, ``o2i``, ``ut_height``), and each sector a vertical array of
``bs_rows`` elements steered electrically to ``downtilt_deg`` (``array_gain_db``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from . import pathloss
from .indoor import O2I_MODELS, UT_HEIGHT_MODELS, UserStates
from .indoor import draw_large_scale as draw_indoor_large_scale
from .interference import INTERFERENCE_MODELS, FadedInterference

LAYOUTS = ("hexgrid",)
TOPOLOGY_USERS = ("center", "all")
BORESIGHTS_DEG = (30.0, 150.0, 270.0)
"""Sector boresights of TR 38.901 Table 7.8-1 (measured from the x axis)."""
ELEMENT_BEAMWIDTH_DEG = 65.0
ELEMENT_MAX_ATTENUATION_DB = 30.0
"""TR 38.901 Table 7.3-1: the element's 3 dB beamwidth in both planes and its front-back / side-lobe limit."""
LOG_DISTANCE_BS_HEIGHT_M = 25.0
"""The gNB height used for the vertical antenna pattern under ``log_distance`` path loss (UMa's)."""
UT_HEIGHT_M = pathloss.UT_DEFAULT_HEIGHT_M
ARRAY_SPACING_WAVELENGTHS = 0.5
"""Vertical element spacing of the gNB array (TR 38.901 Table 7.8-1's calibration panel, d_V = 0.5 λ)."""
MAX_BS_ROWS = 64

TOPOLOGY_RANGES: dict[str, tuple[float, float, str]] = {
    "isd_m": (10.0, 50_000.0, "200 m is TR 38.901's UMi calibration, 500 m UMa's, 1,732 m or 5,000 m RMa's"),
    "load": (0.0, 1.0, "the share of the time a neighbour sector transmits: 0 idle neighbours, 1 full buffers"),
    "downtilt_deg": (0.0, 90.0, "the sectors' downtilt below the horizon; 12 degrees is usual for a macro site"),
    "indoor_fraction": (0.0, 1.0, "the share of users indoors; TR 38.901's calibration has 0.8"),
}
CALIBRATION = {"indoor_fraction": 0.8, "o2i": "mixed", "ut_height": "floors", "bs_rows": 10}
"""The opt-in fields that make a layout TR 38.901 Table 7.8-1's calibration drop (with ``downtilt_deg`` 12)."""
_OPT_IN_DEFAULTS = {"interference": "mean", "indoor_fraction": 0.0, "o2i": "mixed", "ut_height": "fixed", "bs_rows": 1}


def _number_in(field: str, value: Any) -> float:
    low, high, why = TOPOLOGY_RANGES[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"physical.topology.{field} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"physical.topology.{field} must be in [{low:g}, {high:g}] ({why}), got {value:g}")
    return float(value)


@dataclass(frozen=True)
class Topology:
    """The multi-cell layout of ``physical.topology`` (see the module docstring)."""

    layout: str = "hexgrid"
    rings: int = 1
    isd_m: float = 500.0
    sectors: int = 3
    wraparound: bool = True
    load: float = 1.0
    users: str = "center"
    downtilt_deg: float = 12.0
    interference: str = "mean"
    indoor_fraction: float = 0.0
    o2i: str = "mixed"
    ut_height: str = "fixed"
    bs_rows: int = 1

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"physical.topology.layout must be one of {', '.join(repr(x) for x in LAYOUTS)}, got {self.layout!r}")
        if isinstance(self.rings, bool) or self.rings not in (0, 1, 2):
            raise ValueError(f"physical.topology.rings must be 0, 1 or 2 (1, 7 or 19 sites), got {self.rings!r}")
        if isinstance(self.sectors, bool) or self.sectors not in (1, 3):
            raise ValueError(f"physical.topology.sectors must be 1 (omnidirectional) or 3, got {self.sectors!r}")
        if not isinstance(self.wraparound, bool):
            raise ValueError(f"physical.topology.wraparound must be true or false, got {self.wraparound!r}")
        if self.users not in TOPOLOGY_USERS:
            raise ValueError(f"physical.topology.users must be one of {', '.join(repr(x) for x in TOPOLOGY_USERS)}, got {self.users!r}")
        if self.interference not in INTERFERENCE_MODELS:
            raise ValueError(
                f"physical.topology.interference must be one of {', '.join(repr(x) for x in INTERFERENCE_MODELS)} "
                f"(mean: the neighbours' mean power; faded: drawn per fading block), got {self.interference!r}"
            )
        if self.o2i not in O2I_MODELS:
            raise ValueError(
                f"physical.topology.o2i must be one of {', '.join(repr(x) for x in O2I_MODELS)} (TR 38.901 Table 7.4.3-2's "
                f"low- or high-loss building, or half of the users each), got {self.o2i!r}"
            )
        if self.ut_height not in UT_HEIGHT_MODELS:
            raise ValueError(
                f"physical.topology.ut_height must be one of {', '.join(repr(x) for x in UT_HEIGHT_MODELS)} (fixed: 1.5 m; "
                f"floors: indoor users on TR 36.873's floors, 1.5-22.5 m), got {self.ut_height!r}"
            )
        if isinstance(self.bs_rows, bool) or not isinstance(self.bs_rows, int) or not 1 <= self.bs_rows <= MAX_BS_ROWS:
            raise ValueError(
                f"physical.topology.bs_rows must be an integer in [1, {MAX_BS_ROWS}] (elements in each sector's vertical "
                f"array; TR 38.901's calibration has 10), got {self.bs_rows!r}"
            )
        for name in TOPOLOGY_RANGES:
            object.__setattr__(self, name, _number_in(name, getattr(self, name)))

    @classmethod
    def from_dict(cls, values: Any) -> Topology:
        if isinstance(values, Topology):
            return values
        if not isinstance(values, dict):
            raise ValueError(f"physical.topology must be a mapping of layout settings or null, got {values!r}")
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            raise ValueError(f"unknown physical.topology keys {unknown}; allowed keys: {', '.join(allowed)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Every field but the opt-in ones at their defaults (``interference`` ``mean``, no indoor users, fixed
        heights, one element a sector: left out, so a layout written before they existed keeps its scenario's
        fingerprint and resumes)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, default in _OPT_IN_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        return out

    @property
    def has_user_states(self) -> bool:
        """Whether users draw indoor states or heights (``indoor.UserStates``); otherwise all are outdoors at 1.5 m."""
        return self.indoor_fraction > 0.0 or self.ut_height != "fixed"

    @property
    def num_sites(self) -> int:
        return 1 + 3 * self.rings * (self.rings + 1)


_DIRECTIONS = np.array([[math.cos(math.radians(60 * k)), math.sin(math.radians(60 * k))] for k in range(6)])


def site_positions(rings: int, isd_m: float) -> np.ndarray:
    """``[sites, 2]`` site centres in TR 38.901's spiral order: the centre, then each ring counter-clockwise
    from its point on the x axis."""
    positions = [np.zeros(2)]
    for ring in range(1, rings + 1):
        point = ring * _DIRECTIONS[0]
        for side in range(6):
            for _ in range(ring):
                positions.append(point.copy())
                point = point + _DIRECTIONS[(side + 2) % 6]
    return np.array(positions) * isd_m


def wrap_vectors(rings: int, isd_m: float) -> np.ndarray:
    """``[images, 2]`` translations of the layout that tile the plane (the zero vector first): one ring's 7 sites
    repeat along (3R, 2√3R) and its rotations by 60°, two rings' 19 sites along (7.5R, ...), R = isd/√3."""
    if rings == 0:
        return np.zeros((1, 2))
    radius = isd_m / math.sqrt(3.0)
    first = np.array([3.0, 2.0 * math.sqrt(3.0)]) if rings == 1 else np.array([-7.5, 0.5 * math.sqrt(3.0)])
    turns = [math.radians(60 * k) for k in range(6)]
    images = [np.array([math.cos(t) * first[0] - math.sin(t) * first[1], math.sin(t) * first[0] + math.cos(t) * first[1]]) for t in turns]
    return np.vstack([np.zeros(2), np.array(images) * radius])


def in_hexagon(offsets: np.ndarray, isd_m: float) -> np.ndarray:
    """Whether points (offsets from a site) lie in its Voronoi hexagon: within isd/2 along each neighbour's axis."""
    return np.all(np.abs(offsets @ _DIRECTIONS[:3].T) <= isd_m / 2.0, axis=-1)


def _angle_deg(offsets: np.ndarray) -> np.ndarray:
    return np.degrees(np.arctan2(offsets[..., 1], offsets[..., 0]))


def _wrapped(angle_deg: np.ndarray) -> np.ndarray:
    """Angles folded into [-180, 180)."""
    return (angle_deg + 180.0) % 360.0 - 180.0


def element_attenuation_db(azimuth_off_deg, zenith_deg, downtilt_deg: float) -> np.ndarray:
    """TR 38.901 Table 7.3-1: -min(-(A_V + A_H), 30) with A_H = -min(12(φ/65°)², 30) and
    A_V = -min(12((θ - 90° - tilt)/65°)², 30); 0 dB on boresight, relative to the element's maximum gain."""
    horizontal = -np.minimum(12.0 * (np.asarray(azimuth_off_deg) / ELEMENT_BEAMWIDTH_DEG) ** 2, ELEMENT_MAX_ATTENUATION_DB)
    vertical = -np.minimum(
        12.0 * ((np.asarray(zenith_deg) - 90.0 - downtilt_deg) / ELEMENT_BEAMWIDTH_DEG) ** 2, ELEMENT_MAX_ATTENUATION_DB
    )
    return -np.minimum(-(horizontal + vertical), ELEMENT_MAX_ATTENUATION_DB)


def array_gain_db(zenith_deg, rows: int, tilt_deg: float) -> np.ndarray:
    """The gain (dB over one element) of a vertical array of ``rows`` elements d_V = 0.5 λ apart whose weights
    w_m = exp(−j2π·m·d_V·cos θ_tilt)/√M steer it to zenith θ_tilt = 90° + ``tilt_deg`` (TR 38.901 §7.3's
    electrical tilt): |Σ_m w_m·exp(j2π·m·d_V·cos θ)|², M (10·log10 M dB) at θ_tilt."""
    psi = 2.0 * math.pi * ARRAY_SPACING_WAVELENGTHS * (np.cos(np.radians(np.asarray(zenith_deg, dtype=float))) - math.cos(math.radians(90.0 + tilt_deg)))
    phases = np.arange(rows) * psi[..., None]
    power = (np.cos(phases).sum(axis=-1) ** 2 + np.sin(phases).sum(axis=-1) ** 2) / rows
    return 10.0 * np.log10(np.maximum(power, 1e-30))


@dataclass(frozen=True)
class Layout:
    """Sites, their wraparound images, and the sectors (site index and boresight) of one topology."""

    topology: Topology
    sites: np.ndarray
    images: np.ndarray
    bs_height_m: float = LOG_DISTANCE_BS_HEIGHT_M

    @classmethod
    def of(cls, topology: Topology, bs_height_m: float = LOG_DISTANCE_BS_HEIGHT_M) -> Layout:
        images = wrap_vectors(topology.rings, topology.isd_m) if topology.wraparound else np.zeros((1, 2))
        return cls(topology, site_positions(topology.rings, topology.isd_m), images, bs_height_m)

    @property
    def sector_site(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.sites)), self.topology.sectors)

    @property
    def sector_boresight_deg(self) -> np.ndarray | None:
        return None if self.topology.sectors == 1 else np.tile(BORESIGHTS_DEG, len(self.sites))

    def offsets(self, points: np.ndarray) -> np.ndarray:
        """``[points, sites, 2]``: each point's offset from each site's nearest image."""
        candidates = points[:, None, None, :] - (self.sites[None, :, None, :] + self.images[None, None, :, :])
        nearest = np.argmin(np.einsum("psik,psik->psi", candidates, candidates), axis=-1)
        return np.take_along_axis(candidates, nearest[..., None, None], axis=2)[:, :, 0, :]

    def drop(self, rng: np.random.Generator, count: int, sites: np.ndarray, min_distance_m: float,
             boresight_deg: np.ndarray | None = None) -> np.ndarray:
        """``count`` points, point i uniform over site ``sites[i]``'s hexagon (within 60° of ``boresight_deg[i]``
        when given: its sector), at least ``min_distance_m`` from every site. Rejection sampling, in rounds that
        draw ``2·(points still missing)`` candidates, x then y."""
        isd = self.topology.isd_m
        points = np.empty((count, 2))
        todo = np.arange(count)
        while todo.size:
            tries = np.repeat(todo, 2)
            offset = (rng.random((tries.size, 2)) - 0.5) * np.array([isd, 2.0 * isd / math.sqrt(3.0)])
            keep = in_hexagon(offset, isd)
            if boresight_deg is not None:
                keep &= np.abs(_wrapped(_angle_deg(offset) - boresight_deg[tries])) <= 60.0
            candidates = self.sites[sites[tries]] + offset
            if keep.any():
                keep[keep] &= np.linalg.norm(self.offsets(candidates[keep]), axis=-1).min(axis=1) >= min_distance_m
            accepted, first = np.unique(tries[keep], return_index=True)
            points[accepted] = candidates[keep][first]
            todo = np.setdiff1d(todo, accepted)
        return points

    def coupling_loss_db(self, points: np.ndarray, loss_of, rng: np.random.Generator,
                         ut_height_m: np.ndarray | None = None) -> np.ndarray:
        """``[points, sectors]`` path loss (``loss_of(distances [points, sites], rng)``: one LOS state and
        shadowing per point and site, shared by a site's sectors) less each sector's antenna pattern, seen from
        each point's height (``ut_height_m``, 1.5 m when None). One element (``bs_rows`` 1) is tilted
        mechanically by ``downtilt_deg``; an array stands upright and tilts its beam electrically."""
        offsets = self.offsets(points)
        distance = np.maximum(np.linalg.norm(offsets, axis=-1), 1e-3)
        loss = np.repeat(loss_of(distance, rng), self.topology.sectors, axis=1)
        boresight = self.sector_boresight_deg
        if boresight is None:
            return loss
        azimuth = np.repeat(_angle_deg(offsets), self.topology.sectors, axis=1)
        height = self.bs_height_m - (UT_HEIGHT_M if ut_height_m is None else np.asarray(ut_height_m)[:, None])
        zenith = 90.0 + np.degrees(np.arctan2(height, np.repeat(distance, self.topology.sectors, axis=1)))
        rows, tilt = self.topology.bs_rows, self.topology.downtilt_deg
        off_boresight = _wrapped(azimuth - boresight[None, :])
        if rows == 1:
            return loss - element_attenuation_db(off_boresight, zenith, tilt)
        return loss - element_attenuation_db(off_boresight, zenith, 0.0) - array_gain_db(zenith, rows, tilt)


@dataclass(frozen=True)
class CellDrop:
    """One drop of the federation's users in a multi-cell layout: per user its serving sector, the coupling
    loss to it, and the interference on each direction as a rise over the receiver's noise (dB)."""

    serving: np.ndarray
    coupling_loss_db: np.ndarray
    dl_rise_db: np.ndarray
    ul_rise_db: np.ndarray
    all_coupling_loss_db: np.ndarray
    """``[users, sectors]``: path loss less antenna patterns (antenna gains and other losses not included)."""
    los: np.ndarray | None = None
    """Per user, the TR 38.901 LOS state of its link to its serving site (None under ``log_distance``)."""
    dl_interference: FadedInterference | None = None
    ul_interference: FadedInterference | None = None
    """Per user, each direction's interference law when it fades (``interference.FadedInterference``, noise units):
    its mean is the rise's, 10^(rise/10) - 1."""
    states: UserStates | None = None
    """Per user, indoor state, height and O2I loss (None when the layout has neither indoor users nor floors)."""


def geometry_sinr_db(coupling_loss_db: np.ndarray, tx_power_dbm: float, noise_dbm: float, load: float = 1.0,
                     serving: np.ndarray | None = None) -> np.ndarray:
    """TR 38.901 §7.8's geometry SINR: the serving sector's received power over the noise plus every other
    sector's (times ``load``), from coupling losses ``[..., sectors]``; serving = least coupling loss."""
    cl = np.asarray(coupling_loss_db, dtype=float)
    serving = np.argmin(cl, axis=-1) if serving is None else np.asarray(serving)
    own = np.take_along_axis(cl, serving[..., None], axis=-1)[..., 0]
    relative = own[..., None] - cl  # other sectors' power relative to the serving one, dB
    others = np.where(np.arange(cl.shape[-1]) == serving[..., None], -np.inf, relative)
    interference = load * np.sum(10.0 ** (others / 10.0), axis=-1)
    noise = 10.0 ** ((noise_dbm - (tx_power_dbm - own)) / 10.0)
    return -10.0 * np.log10(interference + noise)


def drop_federation(channel, topology: Topology, num_clients: int, rng: np.random.Generator) -> CellDrop:
    """Drop the federation's users in ``topology`` under ``channel``'s path loss and link budget (see the module
    docstring). Draw order: the users' positions, their states (``indoor.UserStates``, only when the layout has
    indoor users or floors), their links' LOS states and shadowing, then one interfering phone per sector, its
    states and its links'."""
    height = LOG_DISTANCE_BS_HEIGHT_M if channel.path_loss_model == "log_distance" else pathloss.bs_height_m(channel.path_loss_model)
    layout = Layout.of(topology, height)

    los_states: list[np.ndarray] = []  # [points, sites] of each call, in call order (the users' first)

    def loss_of(distance: np.ndarray, draws: np.random.Generator) -> np.ndarray:
        if channel.path_loss_model == "log_distance":
            return channel.reference_loss_db + 10.0 * channel.path_loss_exponent * np.log10(distance)
        drawn = pathloss.draw_large_scale(channel.path_loss_model, distance, channel.carrier_ghz, draws, shadowing=channel.shadowing)
        los_states.append(drawn.los)
        return drawn.loss_db

    def coupling(points: np.ndarray) -> tuple[np.ndarray, UserStates | None]:
        """``[points, sectors]`` coupling losses of ``points``, drawing their indoor states and heights first."""
        if not topology.has_user_states:
            return layout.coupling_loss_db(points, loss_of, rng), None
        states = UserStates.draw(rng, len(points), topology.indoor_fraction, topology.o2i, topology.ut_height, channel.carrier_ghz)

        def indoor_loss_of(distance: np.ndarray, draws: np.random.Generator) -> np.ndarray:
            drawn = draw_indoor_large_scale(channel.path_loss_model, distance, channel.carrier_ghz, states, draws, channel.shadowing)
            los_states.append(drawn.los & ~states.indoor[:, None])  # an indoor user's fading has no specular path
            return drawn.loss_db

        return layout.coupling_loss_db(points, indoor_loss_of, rng, states.height_m), states

    sites = len(layout.sites)
    homes = np.zeros(num_clients, dtype=int) if topology.users == "center" else rng.integers(0, sites, num_clients)
    users = layout.drop(rng, num_clients, homes, channel.min_distance_m)
    cl, states = coupling(users)
    serving = np.argmin(cl, axis=1)
    own = cl[np.arange(num_clients), serving]
    los = los_states[0][np.arange(num_clients), layout.sector_site[serving]] if los_states else None
    dl_power = channel.radiated_dbm("dl")
    dl_noise = channel.noise_dbm_hz("dl") + 10.0 * math.log10(channel.bandwidth_hz)
    sinr_dl = geometry_sinr_db(cl, dl_power, dl_noise, topology.load, serving)
    snr_dl = dl_power - own - dl_noise
    boresight = layout.sector_boresight_deg
    phones = layout.drop(rng, len(layout.sector_site), layout.sector_site, channel.min_distance_m, boresight)
    phone_cl, _ = coupling(phones)  # [phones, sectors]: phone p's loss to sector s
    ul_noise_mw = 10.0 ** ((channel.noise_dbm_hz("ul") + 10.0 * math.log10(channel.uplink_bandwidth_hz)) / 10.0)
    backoff = channel.ue_power_dbm - channel.uplink_power_dbm(phone_cl.min(axis=1))  # power control to its best sector
    received_mw = 10.0 ** ((channel.radiated_dbm("ul") - backoff[:, None] - phone_cl) / 10.0)
    np.fill_diagonal(received_mw, 0.0)  # a sector's own phone is the user's turn, not interference
    ul_interference_mw = topology.load * received_mw.sum(axis=0)  # per receiving sector
    dl_faded = ul_faded = None
    if topology.interference == "faded":
        heard = 10.0 ** ((dl_power - cl - dl_noise) / 10.0)  # [users, sectors], noise units
        heard[np.arange(num_clients), serving] = 0.0
        dl_faded = FadedInterference.from_powers(heard, topology.load)
        ul_faded = FadedInterference.from_powers((received_mw / ul_noise_mw).T[serving], topology.load)
    return CellDrop(
        serving=serving,
        coupling_loss_db=own,
        dl_rise_db=snr_dl - sinr_dl,
        ul_rise_db=10.0 * np.log10(1.0 + ul_interference_mw[serving] / ul_noise_mw),
        all_coupling_loss_db=cl,
        los=los,
        dl_interference=dl_faded,
        ul_interference=ul_faded,
        states=states,
    )
