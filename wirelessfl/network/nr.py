"""The 5G NR link abstraction of Sionna SYS, looked up in numpy.

A transfer in ``nr`` mode is a stream of transport blocks (TBs), one per slot, over
the profile's PRBs. In every fading block the base station knows the block's SINR
and picks the highest MCS whose TB error rate meets the BLER target (Sionna's
``InnerLoopLinkAdaptation``); a block where no MCS meets it is an outage block and
carries nothing. Each TB fails with its TBLER, ``1 - (1 - BLER_cb)^C`` for its C code
blocks (Sionna's ``PHYAbstraction``: per-code-block BLER from link-level AWGN tables,
interpolated over code-block size and SINR); a failed TB is retransmitted by HARQ
with Chase combining, so the j-th copy decodes at j times the SINR, up to
``harq_retransmissions`` retransmissions, after which it is lost (left to RLC).

What the tables are: Sionna's own arrays, exported once per (MCS table, REs per PRB)
by a child process (``_nr_build``; importing Sionna reseeds torch's generator, so it
never happens in this process) and cached under ``~/.cache/wirelessfl/nr`` (or
``$WIRELESSFL_CACHE/nr``). The cache is checked before it is used (:func:`read_tables`:
what it was built from, the SHA-256 of its arrays, their shapes and values) and built again,
atomically, when it is not what it should be. Everything after that is numpy, so a 10,000-user round
stays cheap. Sionna's conventions are kept on purpose, so that every lookup equals
Sionna's own call: the SINR is rounded to its 0.1 dB grid (float32, half to even),
below -5 dB reads -5 dB and above the last tabulated point reads the edge value;
MCS 0-2 of table 1 have no BLER data, so the lowest usable MCS is 3.

Per fading block with SINR index s, the expected goodput per slot is
``G[s] = TBS(m*) · (1 - p_lost) / E[transmissions]`` with
``E[transmissions] = 1 + p1 + p1·p2 + ... + p1···pR`` and ``p_lost = p1···p(R+1)``,
``pj = TBLER(m*, j·SINR)``. Retransmissions fill slots of other HARQ processes, so
they cost goodput, not waiting; the round trip is paid once at the end of a
transfer, for the last TB's expected retransmissions (``tail_s``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from wirelessfl.network._nr_build import MAX_PRBS, TABLE_ARRAYS, content_digest

PUSCH, PDSCH = 0, 1
"""Sionna's MCS categories: 0 = uplink (PUSCH), 1 = downlink (PDSCH)."""

MCS_TABLES = (1, 2)
"""TS 38.214 Table 5.1.3.1-1 (64QAM) and -2 (256QAM): the two with BLER tables for both directions."""

PRBS_PER_CARRIER: dict[int, dict[int, int]] = {
    15: {5: 25, 10: 52, 15: 79, 20: 106, 25: 133, 30: 160, 40: 216, 50: 270},
    30: {5: 11, 10: 24, 15: 38, 20: 51, 25: 65, 30: 78, 40: 106, 50: 133, 60: 162, 70: 189, 80: 217, 90: 245, 100: 273},
    60: {10: 11, 15: 18, 20: 24, 25: 31, 30: 38, 40: 51, 50: 65, 60: 79, 70: 93, 80: 107, 90: 121, 100: 135},
}
"""TS 38.101-1 Table 5.3.2-1 (FR1): transmission bandwidth in PRBs per subcarrier spacing (kHz)
and channel bandwidth (MHz)."""

SIONNA_REQUIREMENT = "sionna-no-rt>=2.2,<3"


class SionnaUnavailable(ValueError):
    """``nr`` was asked for but Sionna SYS cannot be imported; the message is one line."""


def prbs_for(bandwidth_hz: float, scs_khz: int) -> int:
    """PRBs of an NR carrier of ``bandwidth_hz`` at ``scs_khz`` (TS 38.101-1 Table 5.3.2-1)."""
    table = PRBS_PER_CARRIER[scs_khz]
    mhz = bandwidth_hz / 1e6
    for width, prbs in table.items():
        if math.isclose(mhz, width, rel_tol=0, abs_tol=1e-6):
            return prbs
    allowed = ", ".join(f"{w:g}" for w in table)
    raise ValueError(f"an NR carrier at {scs_khz} kHz spacing is {allowed} MHz wide (TS 38.101-1), got {mhz:g} MHz")


def slot_s(scs_khz: int) -> float:
    """Slot length: 1 ms at 15 kHz, halved with every doubling of the spacing (14 symbols)."""
    return 1e-3 * 15.0 / scs_khz


@dataclass(frozen=True)
class NrTables:
    """Sionna's tables for one MCS table, per category (PUSCH, PDSCH).

    ``bler[cat, mcs, cbs_index, snr_index]``: per-code-block BLER (inf where Sionna has
    no data); ``qm``, ``rate``: modulation order and code rate per MCS (qm <= 0: not a
    valid MCS); ``tbs``, ``cbs``, ``ncb[cat, mcs, prbs - 1]``: TB size (information bits),
    code-block size and number of code blocks; ``snr_grid`` and ``cbs_grid``:
    (min, max, step) of the interpolation grids (dB, bits).
    """

    bler: np.ndarray
    qm: np.ndarray
    rate: np.ndarray
    tbs: np.ndarray
    cbs: np.ndarray
    ncb: np.ndarray
    snr_grid: tuple[float, float, float]
    cbs_grid: tuple[float, float, float]
    sionna_version: str
    eesm_beta: np.ndarray | None = None
    """EESM's beta per MCS (Sionna's default table; 0 where it has none)."""

    @property
    def snr_db(self) -> np.ndarray:
        """The SINR grid in dB, as Sionna builds it (``np.arange(min, max, step)``)."""
        low, high, step = self.snr_grid
        return np.arange(low, high, step)


def cache_dir() -> Path:
    root = os.environ.get("WIRELESSFL_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "wirelessfl") / "nr"


def _unavailable(detail: str) -> SionnaUnavailable:
    return SionnaUnavailable(
        f"physical.link 'nr' needs Sionna SYS: pip install '{SIONNA_REQUIREMENT}' ({detail})"
    )


def tables_path(version: str, params: dict) -> Path:
    """The cache file of Sionna ``version``'s tables built with ``params``. The arrays' names are in the key: a
    wirelessfl that writes other arrays keeps its own file beside this one."""
    key = hashlib.sha1(json.dumps({"sionna": version, **params, "arrays": TABLE_ARRAYS}, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"sionna-{version}-table{params['mcs_table']}-{params['re_per_prb']}re-{key}.npz"


@lru_cache(maxsize=8)
def load_tables(mcs_table: int = 1, re_per_prb: int = 156) -> NrTables:
    """Sionna's tables for ``mcs_table`` with ``re_per_prb`` data REs per PRB, built once and cached on disk."""
    if mcs_table not in MCS_TABLES:
        raise ValueError(f"mcs_table must be one of {MCS_TABLES}, got {mcs_table!r}")
    spec = find_sionna()
    if spec is None or spec.origin is None:
        raise _unavailable("it is not installed")
    params = {"mcs_table": int(mcs_table), "re_per_prb": int(re_per_prb)}
    version = _sionna_version(Path(spec.origin))
    path = tables_path(version, params)
    tables, problem = read_tables(path, version, params)
    if tables is not None:
        return tables
    if problem is not None and os.path.isdir(path) and not os.path.islink(path):
        raise ValueError(f"{path}: {problem}; delete it (wirelessfl builds the NR tables there again from Sionna)")
    _build_tables(path, params)  # absent, or not what it should be: built again, and put in its place atomically
    tables, problem = read_tables(path, version, params)
    if tables is None:
        raise ValueError(f"{path}: {problem or 'missing'} after building it again; delete it and run again")
    return tables


def _build_tables(path: Path, params: dict) -> None:
    """Sionna's tables exported to ``path`` by a child process (``_nr_build``), which replaces the file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "wirelessfl.network._nr_build", str(path), json.dumps(params)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise _unavailable(f"building its tables failed: {last}")


def read_tables(path: Path, version: str, params: dict) -> tuple[NrTables | None, str | None]:
    """The cached tables at ``path`` when the file is the one built for Sionna ``version`` and ``params`` and holds
    sound tables; else ``(None, what is wrong)`` (``(None, None)``: no file there).

    Checked before it is trusted, as a run's rates come from it: a regular file (a FIFO is never opened, as
    reading it would block; a symbolic link is not followed), an ``.npz`` of the arrays ``_nr_build`` writes and no
    pickle, the Sionna version and parameters it was built from, the SHA-256 of its arrays, their shapes, and
    values a link can use: SINR and code-block grids of a positive step with as many points as bler has, BLER in
    [0, 1] (or inf where Sionna has no data), and a positive transport-block size for every valid MCS."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, f"cannot be read ({err.strerror or err})"
    if not stat.S_ISREG(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        return None, f"{kind}, not the table file"
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in (*TABLE_ARRAYS, "meta")}
        meta = json.loads(str(arrays.pop("meta")))
    except Exception as err:  # truncated, empty, random bytes, a zip without the arrays: all mean "build it again"
        return None, f"not a table file ({type(err).__name__}: {' '.join(str(err).split())[:100]})"
    if not isinstance(meta, dict) or meta.get("sionna") != version or meta.get("params") != params:
        return None, "built from other settings (Sionna version, MCS table or REs per PRB)"
    if "sha256" not in meta:
        return None, "written by an older wirelessfl, without the checksum of its arrays"
    if meta["sha256"] != content_digest(arrays):
        return None, "its arrays changed after it was built (checksum mismatch)"
    problem = _table_problem(arrays)
    if problem is not None:
        return None, problem
    return NrTables(
        bler=arrays["bler"], qm=arrays["qm"], rate=arrays["rate"], tbs=arrays["tbs"], cbs=arrays["cbs"], ncb=arrays["ncb"],
        snr_grid=tuple(float(v) for v in arrays["snr_grid"]), cbs_grid=tuple(float(v) for v in arrays["cbs_grid"]),
        sionna_version=version, eesm_beta=arrays["eesm_beta"],
    ), None


def _table_problem(arrays: dict[str, np.ndarray]) -> str | None:
    """What makes the arrays unusable as NR tables (None when nothing does)."""
    bler, qm, rate = arrays["bler"], arrays["qm"], arrays["rate"]
    if bler.ndim != 4 or bler.shape[0] != 2 or 0 in bler.shape or bler.dtype.kind != "f":
        return f"bler has shape {list(bler.shape)}, not [2, MCS, code-block sizes, SINRs]"
    mcs = bler.shape[1]
    for name, shape, kind in (("qm", (2, mcs), "iu"), ("rate", (2, mcs), "f"), *((n, (2, mcs, MAX_PRBS), "iu") for n in ("tbs", "cbs", "ncb"))):
        if arrays[name].shape != shape or arrays[name].dtype.kind not in kind:
            return f"{name} has shape {list(arrays[name].shape)} ({arrays[name].dtype}), not {list(shape)}"
    for name, size in (("snr_grid", bler.shape[3]), ("cbs_grid", bler.shape[2])):
        grid = arrays[name]
        if grid.shape != (3,) or grid.dtype.kind != "f" or not np.isfinite(grid).all() or grid[2] <= 0 or grid[1] <= grid[0]:
            return f"{name} is {grid.tolist()}, not a finite (min, max, step) with min < max and step > 0"
        if np.arange(*grid).size != size:  # the grid as Sionna builds it (``NrTables.snr_db``)
            return f"{name} {grid.tolist()} does not have the {size} points of bler"
    if np.isnan(bler).any() or ((bler < 0) | ((bler > 1) & ~np.isposinf(bler))).any():
        return "bler holds values outside [0, 1] (NaN included)"
    valid = qm > 0
    if not valid.any() or not np.isfinite(rate[valid]).all() or ((rate[valid] <= 0) | (rate[valid] >= 1)).any():
        return "no valid MCS, or a code rate outside (0, 1)"
    for name in ("tbs", "cbs", "ncb"):
        if (arrays[name][valid] <= 0).any():
            return f"{name} is 0 or negative for a valid MCS"
    beta = arrays["eesm_beta"]
    if beta.shape != (mcs,) or beta.dtype.kind != "f" or not np.isfinite(beta).all() or (beta < 0).any():
        return f"eesm_beta has shape {list(beta.shape)} or values that are not finite and >= 0"
    return None


def find_sionna():
    """Sionna's module spec without importing it (None when it is not installed)."""
    try:
        return importlib.util.find_spec("sionna")
    except (ImportError, ValueError):
        return None


def sionna_version() -> str:
    """The installed Sionna's version, or 'not installed' (read without importing it)."""
    spec = find_sionna()
    return _sionna_version(Path(spec.origin)) if spec is not None and spec.origin else "not installed"


def _sionna_version(init_file: Path) -> str:
    """Sionna's ``__version__`` read from its ``__init__.py`` without importing it (importing reseeds torch)."""
    for line in init_file.read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return "unknown"


def snr_index(tables: NrTables, snr) -> np.ndarray:
    """Grid index of linear SINRs, computed as Sionna's ``get_idx_from_grid`` does (float32, half to even).
    An SINR of 0 reads the grid's first point, as -inf dB does in Sionna's clamp."""
    low, _, step = tables.snr_grid
    db = np.maximum(np.asarray(snr, dtype=np.float32), np.float32(1e-30))  # a new array: worked on in place below
    if db.ndim == 0:
        index = np.rint((np.float32(10.0) * np.log10(db) - np.float32(low)) / np.float32(step))
        return np.clip(index, 0, _grid_size(tables) - 1).astype(np.int64)
    np.log10(db, out=db)
    np.multiply(np.float32(10.0), db, out=db)
    np.subtract(db, np.float32(low), out=db)
    np.divide(db, np.float32(step), out=db)
    np.rint(db, out=db)
    return np.clip(db, 0, _grid_size(tables) - 1, out=db).astype(np.int64)


def _grid_size(tables: NrTables) -> int:
    """Points of the SINR grid (``tables.snr_db.size``, without building the grid)."""
    return tables.bler.shape[3]


def tbler_table(tables: NrTables, category: int, prbs: int) -> np.ndarray:
    """TBLER[mcs, snr_index] of a TB on ``prbs`` PRBs: ``1 - (1 - BLER_cb)^C``, inf where Sionna has no data."""
    low, _, step = tables.cbs_grid
    size = tables.cbs[category, :, prbs - 1]
    cbs_index = np.clip(np.rint((size - low) / step), 0, tables.bler.shape[2] - 1).astype(np.int64)
    bler = tables.bler[category, np.arange(size.size), cbs_index, :].astype(np.float32)
    blocks = tables.ncb[category, :, prbs - 1].astype(np.float32)[:, None]
    with np.errstate(invalid="ignore"):
        tbler = np.float32(1.0) - np.power(np.float32(1.0) - bler, blocks)
    tbler = np.where(np.isinf(bler), bler, tbler)
    tbler[tables.qm[category] <= 0] = np.inf
    return tbler


def select_mcs(tbler: np.ndarray, bler_target: float) -> np.ndarray:
    """Inner-loop link adaptation per SINR index: the highest MCS with TBLER <= target, -1 (outage) if none."""
    ok = tbler <= bler_target
    highest = tbler.shape[0] - 1 - np.argmax(ok[::-1], axis=0)
    return np.where(ok.any(axis=0), highest, -1)


@dataclass(frozen=True)
class NrLink:
    """One direction of an NR carrier, as a link abstraction: linear SINR -> bit/s/Hz of the carrier.

    Precomputed per SINR grid point: the MCS, the HARQ statistics and the goodput per
    slot, so a call is one index computation and one gather.
    """

    category: int
    prbs: int
    bandwidth_hz: float
    slot_s: float
    bler_target: float
    harq_retransmissions: int
    harq_rtt_s: float
    mcs: np.ndarray
    first_tbler: np.ndarray
    transmissions: np.ndarray
    lost: np.ndarray
    goodput_bits: np.ndarray
    tables: NrTables

    def __call__(self, snr) -> np.ndarray:
        """Effective spectral efficiency (bit/s/Hz of the carrier): goodput per slot / (slot · bandwidth)."""
        return self.goodput_bits[snr_index(self.tables, snr)] / (self.slot_s * self.bandwidth_hz)

    def tail_s(self, snr) -> np.ndarray:
        """The HARQ round trips a transfer waits for at its end: the last TB's expected retransmissions."""
        return self.harq_rtt_s * (self.transmissions[snr_index(self.tables, snr)] - 1.0)

    def threshold_db(self) -> float:
        """The lowest grid SINR (dB) at which some MCS meets the BLER target (outage below it)."""
        usable = np.flatnonzero(self.mcs >= 0)
        return float(self.tables.snr_db[usable[0]]) if usable.size else math.inf


def harq_statistics(tbler: np.ndarray, mcs: np.ndarray, retransmissions: int, snr_step_db: float):
    """(first-transmission TBLER, expected transmissions, probability the TB is lost) per SINR index.

    Chase combining: copy j decodes at j times the SINR, i.e. ``10·log10(j)`` dB up the grid
    (clipped at its end), with the same MCS.
    """
    size = tbler.shape[1]
    index = np.arange(size)
    usable = mcs >= 0
    m = np.where(usable, mcs, 0)
    failure = []
    for copy in range(1, retransmissions + 2):
        shifted = np.minimum(index + int(round(10.0 * math.log10(copy) / snr_step_db)), size - 1)
        failure.append(np.where(usable, tbler[m, shifted].astype(np.float64), 1.0))
    transmissions = np.ones(size)
    survive = np.ones(size)
    for p in failure[:-1]:
        survive = survive * p
        transmissions = transmissions + survive
    lost = survive * failure[-1]
    return failure[0], transmissions, lost


def make_link(
    direction: str, bandwidth_hz: float, scs_khz: int = 30, mcs_table: int = 1, bler_target: float = 0.1,
    harq_retransmissions: int = 3, harq_rtt_s: float = 0.0, re_per_prb: int = 156,
) -> NrLink:
    """The NR link of one direction (``dl``: PDSCH, ``ul``: PUSCH) of a carrier."""
    if direction not in ("dl", "ul"):
        raise ValueError(f"direction must be 'dl' or 'ul', got {direction!r}")
    if not 0 < bler_target < 1:
        raise ValueError(f"bler_target must be in (0, 1), got {bler_target!r}")
    tables = load_tables(mcs_table, re_per_prb)
    category = PDSCH if direction == "dl" else PUSCH
    prbs = prbs_for(bandwidth_hz, scs_khz)
    tbler = tbler_table(tables, category, prbs)
    mcs = select_mcs(tbler, bler_target)
    first, transmissions, lost = harq_statistics(tbler, mcs, harq_retransmissions, tables.snr_grid[2])
    tbs = np.where(mcs >= 0, tables.tbs[category, np.maximum(mcs, 0), prbs - 1], 0).astype(float)
    goodput = tbs * (1.0 - lost) / transmissions
    return NrLink(
        category=category, prbs=prbs, bandwidth_hz=float(bandwidth_hz), slot_s=slot_s(scs_khz),
        bler_target=float(bler_target), harq_retransmissions=int(harq_retransmissions), harq_rtt_s=float(harq_rtt_s),
        mcs=mcs, first_tbler=first, transmissions=transmissions, lost=lost, goodput_bits=goodput, tables=tables,
    )


EESM_CLAMP_DB = (-30.0, 30.0)
"""Sionna's ``EESM`` clamps the effective SINR to [-30, 30] dB (its ``sinr_eff_min_db``, ``sinr_eff_max_db``)."""


def eesm_sinr(sinr: np.ndarray, beta) -> np.ndarray:
    """The exponential effective SINR over the last axis (subbands), Sionna's ``EESM``:
    ``-beta·ln(mean_s exp(-SINR_s/beta))`` (linear SINRs, ``beta`` broadcast over the other axes), clamped to
    ``EESM_CLAMP_DB``. Computed from the smallest SINR up, ``min - beta·ln(mean exp(-(SINR - min)/beta))``, so that
    high SINRs do not underflow (Sionna's float32 ``exp`` reads them as the 30 dB clamp; both read the table's edge).
    In float32 for float32 SINRs (as Sionna computes it, and ten times faster here), else in float64."""
    sinr = np.asarray(sinr)
    sinr = sinr if sinr.dtype == np.float32 else sinr.astype(float)
    return _eesm_of(*_eesm_parts(sinr), beta)


def _eesm_parts(sinr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What ``eesm_sinr`` computes of the subbands whatever the beta: their smallest SINR and -(SINR - smallest)."""
    low = sinr.min(axis=-1, keepdims=True)
    return low, -(sinr - low)


def _eesm_of(low: np.ndarray, below: np.ndarray, beta) -> np.ndarray:
    """``eesm_sinr`` from ``_eesm_parts``: the same operations in the same order, so the same numbers."""
    beta = np.asarray(beta, dtype=below.dtype)[..., None]
    effective = (low - beta * np.log(np.mean(np.exp(below / beta), axis=-1, keepdims=True)))[..., 0]
    floor, ceiling = (below.dtype.type(10.0 ** (db / 10.0)) for db in EESM_CLAMP_DB)
    return np.clip(effective, floor, ceiling)


@dataclass(frozen=True)
class EesmLink:
    """An NR direction whose blocks of subbands carry one transport block at one MCS, mapped through EESM.

    Sionna's ``InnerLoopLinkAdaptation`` over subcarriers: for every MCS m, the effective SINR with m's beta,
    and the highest MCS whose TBLER at its own effective SINR meets the target; HARQ copies combine at j times
    that effective SINR. Called on one SINR (a flat block) it is the ``NrLink`` itself.

    The search is a fixed point that never passes the answer: start at m = the MCS the subbands' mean SINR
    supports, then m <- the highest MCS that γ_eff(β_m) supports, until m stays. Since β grows with the MCS and
    γ_eff with β (never above the mean), and TBLER falls with SINR (``tests/network/test_eesm.py`` checks all
    three on Sionna's tables), no MCS above each step's m can meet the target at its own γ_eff, and the m that
    stays meets it: it is the highest that does. It takes two or three passes where trying every MCS takes ~25.
    """

    link: NrLink
    usable: np.ndarray
    """``[mcs, grid]``: TBLER of MCS m at grid SINR s meets the BLER target."""
    goodput_by_mcs: np.ndarray
    """``[mcs, grid]``: expected goodput per slot (bits) of MCS m at grid SINR s, HARQ included."""
    highest: np.ndarray
    """Per grid SINR, the highest MCS that meets the target there (-1: none)."""

    def __call__(self, snr) -> np.ndarray:
        return self.link(snr)

    def mcs_and_index(self, sinr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per block of subbands ``[..., subbands]``: the MCS chosen (-1: outage) and its effective SINR's grid index."""
        sinr = np.asarray(sinr, dtype=np.float32)  # the precision of Sionna's EESM and of ``snr_index``
        flat = sinr.reshape(-1, sinr.shape[-1])
        tables = self.link.tables
        index = snr_index(tables, flat.mean(axis=1, dtype=np.float64))
        chosen = self.highest[index]
        served = np.flatnonzero(chosen >= 0)
        low, below = _eesm_parts(flat[served])  # once: every pass below only changes beta
        todo, rows = served, np.arange(served.size)
        while todo.size:
            m = chosen[todo]
            at = snr_index(tables, _eesm_of(low[rows], below[rows], tables.eesm_beta[m]))
            supported = self.highest[at]
            chosen[todo], index[todo] = supported, at
            going = (supported != m) & (supported >= 0)
            todo, rows = todo[going], rows[going]
        return chosen.reshape(sinr.shape[:-1]), index.reshape(sinr.shape[:-1])

    def subbands_se(self, sinr: np.ndarray) -> np.ndarray:
        """Spectral efficiency (bit/s/Hz of the carrier) of blocks of subbands ``[..., subbands]``."""
        mcs, index = self.mcs_and_index(sinr)
        goodput = np.where(mcs >= 0, self.goodput_by_mcs[np.maximum(mcs, 0), index], 0.0)
        return goodput / (self.link.slot_s * self.link.bandwidth_hz)


def eesm_link(link: NrLink) -> EesmLink:
    """``link`` with EESM over subbands: its TBLER and HARQ goodput per MCS and grid SINR, computed once."""
    tables = link.tables
    if tables.eesm_beta is None:
        raise ValueError("the NR tables have no EESM beta (built by an older wirelessfl); delete the cache file")
    tbler = tbler_table(tables, link.category, link.prbs)
    usable = (tbler <= link.bler_target) & (tables.eesm_beta[:, None] > 0)
    goodput = np.zeros(tbler.shape)
    tbs = tables.tbs[link.category, :, link.prbs - 1].astype(float)
    for m in np.flatnonzero(usable.any(axis=1)).tolist():
        fixed = np.where(usable[m], m, -1)
        _, transmissions, lost = harq_statistics(tbler, fixed, link.harq_retransmissions, tables.snr_grid[2])
        goodput[m] = np.where(usable[m], tbs[m] * (1.0 - lost) / transmissions, 0.0)
    highest = np.where(usable.any(axis=0), usable.shape[0] - 1 - np.argmax(usable[::-1], axis=0), -1)
    return EesmLink(link=link, usable=usable, goodput_by_mcs=goodput, highest=highest)


@dataclass(frozen=True)
class OllaLink:
    """An NR direction whose MCS comes from outer-loop link adaptation (Sionna SYS's ``OuterLoopLinkAdaptation``).

    In each fading block the MCS is the highest whose TBLER meets the BLER target at the estimated SINR: the SINR
    reported ``cqi_delay_blocks`` blocks earlier less an offset (dB); when none does, the lowest MCS, as Sionna's
    ``InnerLoopLinkAdaptation`` falls back. The block's ``feedbacks_per_block`` transmissions (one per slot) then
    succeed or fail at the block's true SINR, and the offset moves by +``delta_up_db`` per NACK and
    -``delta_down_db`` per ACK, clamped to [``offset_min_db``, ``offset_max_db``]: at the loop's equilibrium NACKs
    are a ``bler_target`` share of the feedback. Called on one SINR it is the inner-loop ``NrLink`` (the mean rates
    that size draws); ``start`` begins one transfer's loops.

    With ``eesm`` (blocks of subbands, ``EesmLink``) a block's outcome is taken at its effective SINR for the MCS in
    use (that MCS's beta), and its report is its effective SINR for the MCS the inner loop picks there (what a CQI
    is: the highest MCS the receiver could decode at the target), so the report does not depend on the loop's offset.
    """

    link: NrLink
    delta_up_db: float
    delta_down_db: float
    cqi_delay_blocks: int
    offset_init_db: float
    offset_min_db: float
    offset_max_db: float
    feedbacks_per_block: int
    lowest: int
    """The lowest MCS with BLER data: the one sent when no MCS meets the target at the estimate."""
    nack: np.ndarray
    """``[mcs, grid]``: the chance that one slot's transmission of MCS m at true grid SINR s fails (a TB's
    ``E[T] - 1 + p_lost`` failed copies out of its ``E[T]``)."""
    goodput_by_mcs: np.ndarray
    """``[mcs, grid]``: expected goodput per slot (bits) of MCS m held at true grid SINR s, HARQ included."""
    eesm: EesmLink | None = None
    """The link's EESM over subbands, for blocks of subbands (None: flat blocks only)."""

    def __call__(self, snr) -> np.ndarray:
        return self.link(snr)

    def reported_sinr(self, sinr: np.ndarray) -> np.ndarray:
        """The SINR a block of subbands ``[..., subbands]`` reports (linear, float32): its effective SINR for the MCS
        the inner loop picks there (``EesmLink.mcs_and_index``), for ``lowest`` where it picks none."""
        sinr = np.asarray(sinr, dtype=np.float32)
        inner, _ = self.eesm.mcs_and_index(sinr)
        return _eesm_of(*_eesm_parts(sinr), self.link.tables.eesm_beta[np.where(inner >= 0, inner, self.lowest)])

    def estimated_mcs(self, reported_db: np.ndarray, offset_db: np.ndarray) -> np.ndarray:
        """The MCS chosen for a report (dB) and an offset (dB), as Sionna computes it: the estimate back to a
        linear float32 SINR, its grid index, the highest MCS meeting the target there, else ``lowest``."""
        estimate = np.float32(10.0) ** ((np.asarray(reported_db, np.float32) - np.asarray(offset_db, np.float32)) / np.float32(10.0))
        chosen = self.link.mcs[snr_index(self.link.tables, estimate)]
        return np.where(chosen >= 0, chosen, self.lowest)

    def step(self, offset_db: np.ndarray, nacks: np.ndarray, acks: np.ndarray) -> np.ndarray:
        """The offsets after ``nacks`` and ``acks`` feedbacks (float32, as Sionna keeps them), clamped once."""
        moved = np.asarray(offset_db, np.float32) + np.float32(self.delta_up_db) * np.asarray(nacks, np.float32)
        moved = moved - np.float32(self.delta_down_db) * np.asarray(acks, np.float32)
        return np.clip(moved, np.float32(self.offset_min_db), np.float32(self.offset_max_db)).astype(np.float32)

    def start(self, mean_sinr: np.ndarray) -> OllaRun:
        """The loops of one transfer per user: offsets at ``offset_init_db``, and before the first report
        arrives, each user's mean SINR as its report (what the gNB knows from the user's long-term CQI)."""
        return OllaRun(self, np.asarray(mean_sinr, dtype=float))


class OllaRun:
    """One ``link.transfer_time`` call's outer loops, one per user (rows: the call's users): offsets, the SINR
    reports still on their way, and what the blocks used (MCS counts, NACKs, spectral efficiency moments)."""

    def __init__(self, olla: OllaLink, mean_sinr: np.ndarray) -> None:
        n = mean_sinr.size
        self.olla = olla
        self.offset = np.full(n, olla.offset_init_db, dtype=np.float32)
        mean_db = (10.0 * np.log10(np.maximum(mean_sinr, 1e-30))).astype(np.float32)
        self.pending = np.repeat(mean_db[:, None], olla.cqi_delay_blocks, axis=1)  # oldest first
        self.mcs_blocks = np.zeros((n, olla.nack.shape[0]), dtype=np.int64)
        self.nacks = np.zeros(n)
        self.se_sum, self.se_square, self.zero, self.drawn = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        self.last_mcs = self.last_nacks = np.zeros((0, 0))

    def blocks(self, users: np.ndarray, sinr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Spectral efficiency ``[users, blocks]`` of the next blocks of ``users`` at true SINRs ``sinr`` (``[users,
        blocks]``, or ``[users, blocks, subbands]`` with ``eesm``), the offsets moved block by block. Draws: per block,
        one binomial of the NACKs among its feedbacks for every user."""
        olla, tables = self.olla, self.olla.link.tables
        rows, blocks = sinr.shape[:2]
        subbands = sinr.ndim == 3
        if subbands and olla.eesm is None:
            raise ValueError("blocks of subbands need an OllaLink built with eesm")
        if subbands:
            low, below = _eesm_parts(np.asarray(sinr, dtype=np.float32))
            true_index = np.empty((rows, blocks), dtype=np.int64)
            true_db = olla.reported_sinr(sinr)
        else:
            true_index = snr_index(tables, sinr)
            true_db = sinr.astype(np.float32)
        true_db = (np.float32(10.0) * np.log10(np.maximum(true_db, np.float32(1e-30)))).astype(np.float32)
        delay = olla.cqi_delay_blocks
        reports = np.concatenate([self.pending[users], true_db], axis=1) if delay else true_db
        offset = self.offset[users]
        mcs = np.empty((rows, blocks), dtype=np.int64)
        nacks = np.empty((rows, blocks), dtype=np.int64)
        feedbacks = olla.feedbacks_per_block
        for b in range(blocks):
            m = olla.estimated_mcs(reports[:, b], offset)
            if subbands:  # the block's effective SINR for the MCS in use
                true_index[:, b] = snr_index(tables, _eesm_of(low[:, b], below[:, b], tables.eesm_beta[m]))
            failed = rng.binomial(feedbacks, olla.nack[m, true_index[:, b]])
            offset = olla.step(offset, failed, feedbacks - failed)
            mcs[:, b], nacks[:, b] = m, failed
        self.offset[users] = offset
        if delay:
            self.pending[users] = reports[:, -delay:]
        se = olla.goodput_by_mcs[mcs, true_index] / (olla.link.slot_s * olla.link.bandwidth_hz)
        self.se_sum[users] += se.sum(axis=1)
        self.se_square[users] += (se * se).sum(axis=1)
        self.zero[users] += (se <= 0).sum(axis=1)
        self.drawn[users] += blocks
        self.last_mcs, self.last_nacks = mcs, nacks
        return se

    def count(self, users: np.ndarray, used: np.ndarray) -> None:
        """Add the last ``blocks`` call's blocks to the users' upload: ``used[users, blocks]`` is the share of each
        block the transfer used (1, a fraction for the block it ends in, 0 after)."""
        levels = self.mcs_blocks.shape[1]
        flat = (np.arange(users.size)[:, None] * levels + self.last_mcs)[used > 0]
        self.mcs_blocks[users] += np.bincount(flat, minlength=users.size * levels).reshape(users.size, levels)
        self.nacks[users] += (self.last_nacks * used).sum(axis=1)

    def moments(self, users: np.ndarray, bits_per_se: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per user, the mean and variance of its bits per block and its share of empty blocks, over the blocks it
        has drawn: the law of the rest of a long transfer (``link.transfer_time``'s renewal step)."""
        drawn = np.maximum(self.drawn[users], 1.0)
        mean = self.se_sum[users] / drawn
        var = np.maximum(self.se_square[users] / drawn - mean * mean, 0.0)
        return bits_per_se * mean, bits_per_se**2 * var, self.zero[users] / drawn

    def extend(self, users: np.ndarray, blocks: np.ndarray) -> None:
        """``blocks`` more blocks of ``users``' uploads at the NACK rate of those they drew (renewal step)."""
        drawn = self.mcs_blocks[users].sum(axis=1)
        self.nacks[users] += np.where(drawn > 0, self.nacks[users] / np.maximum(drawn, 1), 0.0) * blocks

    def use(self) -> tuple[np.ndarray, np.ndarray]:
        """Per user, the MCS most of its upload's blocks used (the lowest of a tie; -1 with none) and its NACKs
        (each a HARQ retransmission), rounded."""
        modal = np.argmax(self.mcs_blocks, axis=1)
        return np.where(self.mcs_blocks.sum(axis=1) > 0, modal, -1).astype(np.int64), np.rint(self.nacks).astype(np.int64)


def olla_link(
    link: NrLink, delta_up_db: float = 1.0, cqi_delay_blocks: int = 0, offset_init_db: float = 0.0,
    offset_min_db: float = -20.0, offset_max_db: float = 20.0, feedbacks_per_block: int = 1, eesm: bool = False,
) -> OllaLink:
    """``link`` with outer-loop link adaptation: its per-MCS HARQ statistics at every grid SINR, computed once.
    ``delta_down_db`` is Sionna's ``delta_up·target/(1 - target)``, computed as Sionna does (in float64). ``eesm``: also
    for blocks of subbands, through ``eesm_link(link)``."""
    tables = link.tables
    tbler = tbler_table(tables, link.category, link.prbs)
    valid = np.isfinite(tbler).all(axis=1)
    nack = np.ones(tbler.shape)
    goodput = np.zeros(tbler.shape)
    tbs = tables.tbs[link.category, :, link.prbs - 1].astype(float)
    for m in np.flatnonzero(valid).tolist():
        _, transmissions, lost = harq_statistics(tbler, np.full(tbler.shape[1], m), link.harq_retransmissions, tables.snr_grid[2])
        nack[m] = (transmissions - 1.0 + lost) / transmissions
        goodput[m] = tbs[m] * (1.0 - lost) / transmissions
    target = link.bler_target
    return OllaLink(
        link=link, delta_up_db=float(delta_up_db), delta_down_db=float(delta_up_db) * target / (1.0 - target),
        cqi_delay_blocks=int(cqi_delay_blocks), offset_init_db=float(offset_init_db), offset_min_db=float(offset_min_db),
        offset_max_db=float(offset_max_db), feedbacks_per_block=max(1, int(feedbacks_per_block)),
        lowest=int(np.flatnonzero(valid)[0]), nack=nack, goodput_by_mcs=goodput, eesm=eesm_link(link) if eesm else None,
    )
