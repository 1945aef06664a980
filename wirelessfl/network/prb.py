"""PRB scheduling of a shared uplink carrier with open-loop power control (``physical.ul_scheduler``).

The time share (``time_share``, the default) gives each of m concurrent uploaders the whole carrier 1/m of the
time: every phone sends at its full-band power, so its SINR does not depend on m. NR schedules PRBs instead:
with ``equal_prb`` each of m uploaders holds M/m of the carrier's M PRBs, and its PUSCH power follows TS 38.213
§7.1.1's open loop for the PRBs it holds (``open_loop_power_dbm``, Sionna SYS's
``open_loop_uplink_power_control``), capped at its maximum. A phone below its cap scales its power with its
PRBs (same SINR, rate proportional to the PRBs: the time share's rate); a capped phone puts the same power into
fewer PRBs, so its SINR rises by M/k and it sends faster than its time share. ``proportional_fair`` hands the
PRBs out by Sionna SYS's ``PFSchedulerSUMIMO`` metric instead (``pf_shares``).

The model is a fluid one, per phone: an upload needs ``service`` seconds of the whole carrier (its
``transfer_time`` alone, drawn as for the time share), and while m uploads are in progress it advances at
``speed = R(its PRB share) / R(M)`` of that, its rate on its share over its rate on the whole carrier
(``share_table``). More uploaders than PRBs (m > M) hold one PRB each a share M/m of the slots. Pure numpy.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from . import link, nr
from .profile import PhysicalChannel

SCHEDULERS = ("time_share", "equal_prb", "proportional_fair")
"""``physical.ul_scheduler``: how concurrent uploaders share one uplink carrier (``uplink: shared``)."""

PRB_HZ = 180e3
"""The bandwidth TS 38.213's 10·log10(2^μ·M_RB) counts a PRB of 15 kHz spacing as."""


def open_loop_power_dbm(path_loss_db, prbs, p0_dbm: float, alpha: float, p_max_dbm) -> np.ndarray:
    """PUSCH transmit power (dBm) of TS 38.213 §7.1.1's open loop without closed-loop or format terms:
    min(P_max, P0 + α·PL + 10·log10(#PRB)), the equation of Sionna SYS's ``open_loop_uplink_power_control``
    (which counts #PRB as ceil(subcarriers / 12); here ``prbs`` may be any positive number)."""
    prbs = np.asarray(prbs, dtype=float)
    return np.minimum(p_max_dbm, p0_dbm + alpha * np.asarray(path_loss_db, dtype=float) + 10.0 * np.log10(prbs))


def carrier_prbs(channel: PhysicalChannel) -> int:
    """M, the uplink carrier's PRBs: TS 38.101-1's count for ``link: nr``, else the carrier over 180 kHz."""
    if channel.link == "nr":
        return nr.prbs_for(channel.uplink_bandwidth_hz, channel.nr.subcarrier_spacing_khz)
    return max(1, int(channel.uplink_bandwidth_hz // PRB_HZ))


@dataclass(frozen=True)
class PrbLink:
    """Each uploader's power and SINR as a function of the PRBs it holds, on a carrier of ``prbs`` PRBs.

    ``snr_full``: linear SINR on the whole carrier (at ``power_full_dbm``, the time share's power);
    ``path_loss_db``: the loss power control compensates (None: every phone at ``p_max_dbm``). x PRBs are
    x/M of the carrier, and power control counts them as x/M of the carrier's bandwidth over 180 kHz, the
    convention of the time share's power (``PhysicalChannel.uplink_power_dbm``), so x = M gives its power
    exactly.
    """

    prbs: int
    carrier_over_prb: float
    snr_full: np.ndarray
    power_full_dbm: np.ndarray
    p_max_dbm: float
    p0_dbm: float | None
    alpha: float
    path_loss_db: np.ndarray | None

    def power_dbm(self, x) -> np.ndarray:
        """Transmit power (dBm) with x PRBs (x > 0; broadcast against the uploaders)."""
        x = np.asarray(x, dtype=float)
        if self.p0_dbm is None:
            users = self.snr_full.shape if x.ndim < 2 else (self.snr_full.size, 1)
            return np.full(np.broadcast_shapes(x.shape, users), float(self.p_max_dbm))
        loss = self.path_loss_db if x.ndim < 2 else self.path_loss_db[:, None]
        return open_loop_power_dbm(loss, x / self.prbs * self.carrier_over_prb, self.p0_dbm, self.alpha, self.p_max_dbm)

    def sinr(self, x) -> np.ndarray:
        """Linear SINR with x PRBs: the power over x/M of the carrier's noise and interference."""
        x = np.asarray(x, dtype=float)
        full = self.snr_full if x.ndim < 2 else self.snr_full[:, None]
        base = self.power_full_dbm if x.ndim < 2 else self.power_full_dbm[:, None]
        return full * (self.prbs / x) * 10.0 ** ((self.power_dbm(x) - base) / 10.0)


def prb_link(channel: PhysicalChannel, snr_full: np.ndarray, measured_loss_db: np.ndarray) -> PrbLink:
    """``PrbLink`` of the uploaders whose whole-carrier SINR is ``snr_full`` and whose loss to their serving cell
    (coupling loss, before the link budget's gains) is ``measured_loss_db``."""
    carrier_over_prb = channel.uplink_bandwidth_hz / PRB_HZ
    loss = None
    if channel.ul_p0_dbm is not None:
        loss = np.asarray(measured_loss_db, dtype=float) - channel.bs_antenna_gain_dbi - channel.ue_antenna_gain_dbi + channel.other_losses_db
    made = PrbLink(carrier_prbs(channel), carrier_over_prb, np.asarray(snr_full, dtype=float), np.zeros(0), channel.ue_power_dbm,
                   channel.ul_p0_dbm, channel.ul_alpha, loss)
    object.__setattr__(made, "power_full_dbm", made.power_dbm(float(made.prbs)) if loss is not None
                       else np.full(made.snr_full.shape, channel.ue_power_dbm))
    return made


def share_table(prb: PrbLink, se) -> np.ndarray:
    """[uploaders, M + 1]: column k is the rate with k PRBs over the rate with all M, k·SE(SINR(k)) / (M·SE(SINR(M))),
    ``se`` a link (``link.LINKS`` name or callable) mapping linear SINRs to spectral efficiency. Column 0 is 0 and column M is 1; an uploader with no rate on
    the whole carrier (in outage: it is never scheduled) gets k/M."""
    m_total = prb.prbs
    k = np.arange(1, m_total + 1, dtype=float)
    rate = k[None, :] * link.spectral_efficiency(prb.sinr(np.broadcast_to(k, (prb.snr_full.size, m_total))), se)
    full = rate[:, -1:]
    usable = full[:, 0] > 0
    table = np.zeros((prb.snr_full.size, m_total + 1))
    table[:, 1:] = np.where(usable[:, None], rate / np.where(full > 0, full, 1.0), k[None, :] / m_total)
    table[:, -1] = 1.0
    return table


ERGODIC_GRID_DB = (-60.0, 90.0, 0.05)
"""The mean-SINR grid (dB) of ``ergodic_se``: wide enough for the SINRs a carrier's PRB shares reach."""


def ergodic_se(se, fading: str, k_factor: float | None):
    """SE(mean SINR) averaged over a flat block's fading law (a fixed draw of 4,096 gains, as the ergodic rates of
    ``physical``), tabulated once on ``ERGODIC_GRID_DB`` and read by linear interpolation in dB: what a long upload
    over block fading delivers per Hz at a mean SINR."""
    low, high, step = ERGODIC_GRID_DB
    grid_db = np.arange(low, high + step / 2, step)
    gains = link.draw_fading(np.random.default_rng(0), 4096, fading, k_factor)
    table = np.empty(grid_db.size)
    for start in range(0, grid_db.size, 256):
        part = 10.0 ** (grid_db[start : start + 256, None] / 10.0)
        table[start : start + 256] = link.spectral_efficiency(part * gains[None, :], se).mean(axis=1)

    def at(snr) -> np.ndarray:
        snr_db = 10.0 * np.log10(np.maximum(np.asarray(snr, dtype=float), 1e-300))
        return np.interp(snr_db, grid_db, table)

    return at


def equal_speed(table: np.ndarray, m: int) -> np.ndarray:
    """Each row's speed with m uploads in progress under an equal split: M/m PRBs each, as a rotation of k = ⌊M/m⌋
    and k + 1 PRBs that gives k + 1 a share f = M/m − k of the slots, so the rate is (1 − f)·R(k) + f·R(k + 1)."""
    m_total = table.shape[1] - 1
    k = m_total // m
    f = m_total / m - k
    if f == 0.0:
        return table[:, k].copy()
    return (1.0 - f) * table[:, k] + f * table[:, k + 1]


def pf_shares(table: np.ndarray) -> np.ndarray:
    """Each row's PRBs under proportional fairness with m = rows ≤ M uploads in progress.

    Every uploader first gets one PRB; each of the other M − m goes to the uploader with the highest proportional-
    fair metric, the rate the next PRB adds over the rate it already has, (R(k + 1) − R(k)) / R(k) (Sionna SYS's
    ``PFSchedulerSUMIMO`` metric, achievable rate over achieved throughput, for one more PRB). With each row's
    metrics made non-increasing in k (a running minimum: a rate that is concave in its PRBs, as Shannon's, is
    unchanged) this is a water level: the metrics above it are granted, and the PRBs left at the level are shared
    by the rows that reach it in proportion to their metrics there, so equal rows get equal shares (M/m each
    when no phone is capped: the equal split)."""
    m, m_total = table.shape[0], table.shape[1] - 1
    extra = m_total - m
    shares = np.ones(m)
    if extra <= 0:
        return shares
    have = table[:, 1:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(have > 0, (table[:, 2:] - have) / np.where(have > 0, have, 1.0), np.inf)
    gain = np.minimum.accumulate(gain, axis=1)
    level = np.sort(gain, axis=None)[-extra]
    tolerance = 1e-12 * max(abs(level), 1e-300) if math.isfinite(level) else 0.0
    above = gain > level + tolerance
    at = ~above & (gain >= level - tolerance)
    granted = above.sum(axis=1)
    left = extra - int(granted.sum())
    ties = at.sum(axis=1)
    return shares + granted + (left * ties / ties.sum() if left > 0 else 0.0)


def pf_speed(table: np.ndarray) -> np.ndarray:
    """Each row's speed under ``pf_shares``: its rate at x PRBs, a rotation of ⌊x⌋ and ⌈x⌉ as in ``equal_speed``."""
    x = pf_shares(table)
    k = np.minimum(np.floor(x).astype(int), table.shape[1] - 2)
    f = x - k
    rows = np.arange(table.shape[0])
    return (1.0 - f) * table[rows, k] + f * table[rows, k + 1]


def light_speed(table: np.ndarray, m: int, scheduler: str) -> np.ndarray:
    """Speeds of the m ≤ M uploads in progress (rows of ``table``) under ``scheduler``."""
    return pf_speed(table) if scheduler == "proportional_fair" else equal_speed(table, m)


def prb_landings(ready, service: np.ndarray, table: np.ndarray, scheduler: str = "equal_prb") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Landing times, airtimes and PRB-seconds of uploads sharing a carrier's PRBs (equally, or proportional-fair).

    Upload j is ready at ``ready[j]`` (a number: all at once), needs ``service[j]`` seconds of the whole carrier
    and advances at ``light_speed(table, m, scheduler)[j]`` while m ≤ M are in progress (proportional fairness gives
    the same equal turns on one PRB as ``equal_prb`` when m > M: every phone's rate on one PRB a share M/m of the
    slots is proportional to M/m, so no other split raises the sum of log-rates). With m ≤ M (PRBs) everyone holds PRBs
    in every slot (airtime = time in progress); with m > M each holds one PRB a share M/m of the slots and
    advances at table[j, 1]·M/m, so in the virtual time U (dU/dt = M/m) every upload advances at its own constant
    rate: landings come from a heap in O(n log n), and airtime and PRB-seconds both grow as U. An upload in outage
    (``inf`` service) is not scheduled: it lands at ``inf`` with no airtime. One upload alone advances at 1 and
    lands at ready + service, the time share's float.
    """
    service = np.asarray(service, dtype=float)
    n, m_total = service.size, table.shape[1] - 1
    starts = np.broadcast_to(np.asarray(ready, dtype=float), service.shape)
    landings, airtime, prb_s = np.full(n, math.inf), np.zeros(n), np.zeros(n)
    # Python floats in the event loop: the same IEEE arithmetic as numpy's scalars, several times faster to read.
    start_at, needs, one_prb = starts.tolist(), service.tolist(), table[:, 1].tolist()
    order = [j for j in np.argsort(starts, kind="stable").tolist() if math.isfinite(needs[j])]
    active: list[int] = []  # light regime (m <= M): explicit remaining service
    left: dict[int, float] = {}
    heap: list[tuple[float, int]] = []  # heavy regime (m > M): virtual finishing tags
    joined: dict[int, float] = {}  # U at which an upload entered the heavy regime
    now = virtual = 0.0
    position = 0

    def to_heavy() -> None:
        for j in active:
            heapq.heappush(heap, (virtual + _per(left[j], one_prb[j]), j))
            joined[j] = virtual
        active.clear()
        left.clear()

    def to_light() -> None:
        for tag, j in heap:
            left[j] = (tag - virtual) * one_prb[j]
            airtime[j] += virtual - joined[j]
            prb_s[j] += virtual - joined[j]
            active.append(j)
        heap.clear()
        active.sort(key=lambda j: start_at[j])

    while position < len(order) or heap or active:
        arrival = start_at[order[position]] if position < len(order) else math.inf
        if heap:
            m = len(heap)
            tag, j = heap[0]
            departure = now + (tag - virtual) * m / m_total
            if departure <= arrival:
                heapq.heappop(heap)
                now, virtual = departure, tag
                landings[j] = departure
                airtime[j] += virtual - joined[j]
                prb_s[j] += virtual - joined[j]
                if len(heap) == m_total:
                    to_light()
                continue
            virtual += (arrival - now) * m_total / m
            now = arrival
            j = order[position]
            position += 1
            heapq.heappush(heap, (virtual + _per(needs[j], one_prb[j]), j))
            joined[j] = virtual
            continue
        if active:
            m = len(active)
            index = np.array(active)
            speed = light_speed(table[index], m, scheduler)
            remaining = np.array([left[j] for j in active])
            times = remaining / speed
            first = int(np.argmin(times))
            departure = now + float(times[first])
            step = min(departure, arrival) - now
            airtime[index] += step
            prb_s[index] += step * (m_total / m if scheduler != "proportional_fair" else pf_shares(table[index]))
            if departure <= arrival:
                now = departure
                done = [j for j, t in zip(active, times.tolist()) if t <= times[first] * (1 + 1e-12)]
                for j, rest in zip(active, (remaining - speed * step).tolist()):
                    left[j] = rest
                for j in done:
                    landings[j] = now
                    active.remove(j)
                    left.pop(j)
                continue
            for j, rest in zip(active, (remaining - speed * step).tolist()):
                left[j] = rest
        now = arrival
        j = order[position]
        position += 1
        active.append(j)
        left[j] = needs[j]
        if len(active) > m_total:
            to_heavy()
    return landings, airtime, prb_s


def _per(service: float, rate: float) -> float:
    """``service / rate`` as numpy divides: a rate of 0 gives inf (nan for no service) instead of an error."""
    if rate:
        return service / rate
    return math.inf if service > 0 else math.nan if service == 0 else -math.inf
