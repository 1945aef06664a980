"""Link abstractions and block-fading transfers, pure numpy.

``physical.py`` uses them when a profile sets ``physical.link``, ``coherence_s`` or
``ue_speed_mps``, or ``multicast``. What is here:

* **Spectral efficiency of one block** (bit/s/Hz) from a linear SNR:
  ``shannon`` (log2(1 + SNR)) and ``truncated_shannon``, the attenuated and
  truncated Shannon bound of 3GPP TR 36.942 annex A (A.1 downlink, A.2 uplink):

      Thr(SNR) = 0                          for SNR < SNR_MIN
               = min(α·log2(1 + SNR), Thr_MAX) otherwise

  with the TR's baseline parameters ``TR36942_DOWNLINK`` (α = 0.6,
  SNR_MIN = -10 dB, Thr_MAX = 4.4 bit/s/Hz, 64QAM 4/5) and ``TR36942_UPLINK``
  (α = 0.4, SNR_MIN = -10 dB, Thr_MAX = 2.0 bit/s/Hz, 16QAM 3/4). The TR writes
  the cap as SINR_MAX, "the SINR at which max throughput is reached", which is the
  same thing as min(·, Thr_MAX).
* **Small-scale fading**: power gains of mean 1, ``rayleigh`` (Exp(1)),
  ``rician`` with a linear K-factor (|sqrt(K/(K+1)) + CN(0, 1/(K+1))|²), one for all users or one per
  user (0 for a user without a LOS path: Rayleigh in distribution), or ``none``.
* **Block-fading transfers** (``transfer_time``): a transfer is cut into coherence
  blocks of ``coherence_s`` seconds, each with an independent fading draw; block b
  delivers ``B·SE(γ̄·g_b)·T_c`` bits, and the transfer ends inside the first block
  where the running total reaches its size. A block with rate 0 (below SNR_MIN)
  delivers nothing: it is an outage block. A transfer not delivered within
  ``max_blocks`` blocks is in outage: time ``inf``. A long transfer therefore sees
  the ergodic rate E[B·SE(γ̄·g)], a short one the rate of its first block.
  ``coherence_s = inf`` is today's model: one draw held for the whole transfer.
* **Multicast** (``multicast_transfer``) over the same blocks, with a rate policy per
  block: ``worst_user`` (the weakest receiver's rate in each block: today's policy,
  adapted per block) or ``coverage`` with q in (0, 1] (the rate that the best
  ceil(q·n) receivers can decode; the others miss that block's bits and are
  repaired by unicast: the per-receiver repair bits are returned). ``coverage``
  with q = 1 is ``worst_user``.
* ``coherence_time_s(speed, fc)``: Clarke's model, T_c = 0.423/f_D.

Everything is vectorised with numpy over users (unicast) or receivers (multicast) and
blocks, so a 10,000-user round costs milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .interference import FadedInterference

FADING_MODELS = ("rayleigh", "rician", "none")
MULTICAST_POLICIES = ("worst_user", "coverage")
DEFAULT_MAX_BLOCKS = 10_000
MIN_EXACT_BLOCKS = 256
"""Fading blocks every unicast transfer draws one by one before the rest of it is drawn in one step from renewal
theory (``transfer_time``): the same for every user, whatever the call's population, so a user's outcome does not
depend on how many others share the vectorised call."""
DRAW_BUDGET = 1 << 20
"""A multicast stream draws ``max(MIN_EXACT_BLOCKS, DRAW_BUDGET // receivers)`` blocks before it extrapolates: its
receivers are its own, so its budget depends on nothing outside the stream."""
TAIL_POINTS = 4096
"""Points of the fading law over which a transfer's bits per block are averaged for its renewal-theory rest: half
spread evenly over the probability mass, half over the tail from 1e-3 down to 1e-15 (rare good blocks count)."""


def exact_blocks_for(rows: int) -> int:
    """Blocks a multicast stream to ``rows`` receivers draws one by one before it extrapolates."""
    return max(MIN_EXACT_BLOCKS, DRAW_BUDGET // max(rows, 1))
_CHUNK_ELEMENTS = 1 << 20  # at most ~1M block draws in memory at once (8 MB per float array)


# --------------------------------------------------------------------------- link abstractions


@dataclass(frozen=True)
class TruncatedShannon:
    """Parameters of the attenuated, truncated Shannon bound (3GPP TR 36.942 annex A)."""

    alpha: float
    snr_min_db: float
    max_se: float

    def __call__(self, snr) -> np.ndarray:
        return truncated_shannon(snr, self.alpha, self.snr_min_db, self.max_se)


TR36942_DOWNLINK = TruncatedShannon(alpha=0.6, snr_min_db=-10.0, max_se=4.4)
"""TR 36.942 Table A.1 (E-UTRA downlink baseline): α = 0.6 (implementation losses),
SINR_MIN = -10 dB (QPSK 1/8), Thr_MAX = 4.4 bit/s/Hz (64QAM 4/5)."""

TR36942_UPLINK = TruncatedShannon(alpha=0.4, snr_min_db=-10.0, max_se=2.0)
"""TR 36.942 Table A.2 (E-UTRA uplink baseline): α = 0.4, SINR_MIN = -10 dB (QPSK 1/5),
Thr_MAX = 2.0 bit/s/Hz (16QAM 3/4). α and SINR_MIN agree with public implementations
citing the TR; Thr_MAX = 2.0 is from the TR as we recall it and was not checked against
a public copy (see docs/network.md)."""

LINKS: dict[str, Callable[[np.ndarray], np.ndarray]] = {}  # filled below


def _snr_array(snr) -> np.ndarray:
    array = np.asarray(snr, dtype=float)
    if array.size and not np.all(array >= 0):  # nan fails too
        bad = array[~(array >= 0)].flat[0]
        raise ValueError(f"snr must be a linear power ratio >= 0, got {bad:g}")
    return array


def shannon(snr) -> np.ndarray:
    """Shannon spectral efficiency log2(1 + SNR) in bit/s/Hz; ``snr`` linear, any shape."""
    return np.log2(1.0 + _snr_array(snr))


def truncated_shannon(snr, alpha: float = 0.6, snr_min_db: float = -10.0, max_se: float = 4.4) -> np.ndarray:
    """Attenuated, truncated Shannon bound of 3GPP TR 36.942 annex A, in bit/s/Hz.

    0 below ``snr_min_db``; ``min(alpha·log2(1 + SNR), max_se)`` at or above it.
    The defaults are the TR's downlink baseline (Table A.1); the uplink baseline
    (Table A.2) is ``alpha=0.4, snr_min_db=-10, max_se=2.0`` (``TR36942_UPLINK``).
    """
    if not (0 < alpha <= 1):
        raise ValueError(f"alpha must be in (0, 1] (an attenuation of the Shannon bound), got {alpha!r}")
    if not (max_se > 0 and math.isfinite(max_se)):
        raise ValueError(f"max_se must be > 0 and finite (bit/s/Hz), got {max_se!r}")
    if not math.isfinite(snr_min_db):
        raise ValueError(f"snr_min_db must be finite (dB), got {snr_min_db!r}")
    s = _snr_array(snr)
    snr_min = 10.0 ** (snr_min_db / 10.0)
    return np.where(s < snr_min, 0.0, np.minimum(alpha * np.log2(1.0 + s), max_se))


LINKS.update(
    {
        "shannon": shannon,
        "truncated_shannon": TR36942_DOWNLINK,
        "truncated_shannon_dl": TR36942_DOWNLINK,
        "truncated_shannon_ul": TR36942_UPLINK,
    }
)


def _link(link) -> Callable[[np.ndarray], np.ndarray]:
    if callable(link):
        return link
    if link not in LINKS:
        raise ValueError(f"link must be one of {', '.join(repr(k) for k in LINKS)} or a callable, got {link!r}")
    return LINKS[link]


def spectral_efficiency(snr, link="shannon") -> np.ndarray:
    """Spectral efficiency in bit/s/Hz of ``link`` (a name from ``LINKS`` or a callable) at ``snr``."""
    return _link(link)(snr)


# --------------------------------------------------------------------------- fading


def _fading_args(fading: str, k_factor) -> None:
    """``k_factor``: one linear K for every user, or (``rician``) an array of one K per user, 0 for a user whose
    link has no LOS path (Rayleigh in distribution)."""
    if fading not in FADING_MODELS:
        raise ValueError(f"fading must be one of {', '.join(repr(f) for f in FADING_MODELS)}, got {fading!r}")
    if fading == "rician" and isinstance(k_factor, np.ndarray):
        if k_factor.ndim != 1 or k_factor.dtype.kind not in "fiu" or not np.all((k_factor >= 0) & np.isfinite(k_factor)):
            raise ValueError("k_factor must be linear K-factors >= 0 and finite for rician fading, one per user")
    elif fading == "rician":
        if k_factor is None or isinstance(k_factor, bool) or not (0 <= float(k_factor) < math.inf):
            raise ValueError(f"k_factor must be a linear K-factor >= 0 and finite for rician fading, got {k_factor!r}")


def _users_k(k_factor, users: np.ndarray):
    """The K-factors of ``users`` (indices): a per-user array is indexed, one K for all is kept."""
    return k_factor[users] if isinstance(k_factor, np.ndarray) else k_factor


def draw_fading(rng: np.random.Generator, shape, fading: str = "rayleigh", k_factor=None) -> np.ndarray:
    """Power gains |h|² of mean 1, one per element of ``shape``.

    * ``rayleigh``: Exp(1), one ``standard_exponential`` per gain;
    * ``rician``: |sqrt(K/(K+1)) + sqrt(1/(2(K+1)))·(x + jy)|² with x, y ~ N(0, 1),
      one ``standard_normal(shape + (2,))`` call; K = 0 is Rayleigh in distribution.
      ``k_factor`` may be an array of one K per row (the first axis of ``shape``: one per user):
      the draws are the same call, so the generator advances as with one K;
    * ``none``: ones, no draw.
    """
    _fading_args(fading, k_factor)
    if fading == "rayleigh":
        return rng.standard_exponential(shape)
    if fading == "none":
        return np.ones(shape)
    if isinstance(k_factor, np.ndarray):
        dims = tuple(np.atleast_1d(shape))
        if k_factor.shape != dims[:1]:
            raise ValueError(f"k_factor has {k_factor.size} K-factors for {dims[0]} users")
        k = k_factor.astype(float).reshape(dims[:1] + (1,) * (len(dims) - 1))
        xy = rng.standard_normal(dims + (2,)) * np.sqrt(1.0 / (2.0 * (k + 1.0)))[..., None]
        return (np.sqrt(k / (k + 1.0)) + xy[..., 0]) ** 2 + xy[..., 1] ** 2
    k = float(k_factor)
    xy = rng.standard_normal(tuple(np.atleast_1d(shape)) + (2,)) * math.sqrt(1.0 / (2.0 * (k + 1.0)))
    return (math.sqrt(k / (k + 1.0)) + xy[..., 0]) ** 2 + xy[..., 1] ** 2


def coherence_time_s(speed_m_s: float, fc_ghz: float) -> float:
    """Coherence time T_c = 0.423 / f_D with Doppler f_D = v·f_c/c (Clarke's model; the
    geometric mean rule T_c = sqrt(9/(16π f_D²)), Rappaport, *Wireless Communications*, §5.4.3).
    ``inf`` for a user standing still."""
    if not (speed_m_s >= 0 and math.isfinite(speed_m_s)):
        raise ValueError(f"speed_m_s must be >= 0 and finite (m/s), got {speed_m_s!r}")
    if not (fc_ghz > 0 and math.isfinite(fc_ghz)):
        raise ValueError(f"fc_ghz must be > 0 and finite (GHz), got {fc_ghz!r}")
    if speed_m_s == 0:
        return math.inf
    doppler_hz = speed_m_s * fc_ghz * 1e9 / 3.0e8
    return 0.423 / doppler_hz


# --------------------------------------------------------------------------- transfers


@dataclass(frozen=True)
class Transfer:
    """Per-user result of ``transfer_time``.

    ``time_s``: seconds to deliver the bits (``inf`` in outage; 0 for 0 bits);
    ``blocks``: coherence blocks used, the last one possibly partly;
    ``outage_blocks``: blocks among those with rate 0; ``outage``: not delivered within
    ``max_blocks`` blocks (or, with ``coherence_s = inf``, a rate of 0); ``mcs`` and ``retransmissions``: with a
    link that adapts block by block (``nr.OllaLink``), the MCS most blocks used and the HARQ NACKs, else None.
    """

    time_s: np.ndarray
    blocks: np.ndarray
    outage_blocks: np.ndarray
    outage: np.ndarray
    mcs: np.ndarray | None = None
    retransmissions: np.ndarray | None = None


def _check_subbands(subbands: int) -> None:
    if isinstance(subbands, bool) or not isinstance(subbands, (int, np.integer)) or subbands < 1:
        raise ValueError(f"subbands must be an integer >= 1, got {subbands!r}")


def _check_common(coherence_s: float, max_blocks: int) -> None:
    if isinstance(coherence_s, bool) or not (coherence_s > 0):  # nan fails
        raise ValueError(f"coherence_s must be > 0 seconds (inf: one fading draw per transfer), got {coherence_s!r}")
    if isinstance(max_blocks, bool) or not isinstance(max_blocks, (int, np.integer)) or max_blocks < 1:
        raise ValueError(f"max_blocks must be an integer >= 1, got {max_blocks!r}")


def _nonneg_finite(name: str, values, unit: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.size and not np.all((array >= 0) & np.isfinite(array)):
        bad = array[~((array >= 0) & np.isfinite(array))].flat[0]
        raise ValueError(f"{name} must be >= 0 and finite ({unit}), got {bad:g}")
    return array


def _chunk(remaining_bits: np.ndarray, mean_rate_bps: np.ndarray, coherence_s: float, rows: int, left: int) -> int:
    """How many blocks to draw next: enough for most rows to finish, within memory and the cap.

    Rows whose mean rate is 0 (a truncated-Shannon user below SINR_min on average, who
    delivers only in good blocks) have no estimate: when only they are left, draw as
    many blocks as memory allows, instead of 64 a pass (a 10,000-user UMa round
    took 16,766 passes and 1.37 s; now 0.69 s, benchmarks/bench_network.py).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        est = remaining_bits / (mean_rate_bps * coherence_s)
    est = est[np.isfinite(est)]
    guess = int(math.ceil(1.3 * float(np.quantile(est, 0.9)))) + 2 if est.size else left
    return max(1, min(left, max(4, guess), max(1, _CHUNK_ELEMENTS // max(rows, 1))))


def _crossing(per_block_bits: np.ndarray, remaining: np.ndarray):
    """First block (per row) where the running delivered total reaches ``remaining``.

    Returns (finished mask, crossing index k, bits still owed when block k starts,
    cumulative bits per row over the whole chunk).
    """
    cum = np.cumsum(per_block_bits, axis=-1)
    finished = cum[..., -1] >= remaining
    k = np.argmax(cum >= remaining[..., None], axis=-1)
    before = np.where(k > 0, np.take_along_axis(cum, np.maximum(k - 1, 0)[..., None], axis=-1)[..., 0], 0.0)
    return finished, k, remaining - before, cum[..., -1]


def transfer_time(
    bits,
    bandwidth_hz,
    mean_snr,
    rng: np.random.Generator,
    coherence_s: float,
    fading: str = "rayleigh",
    k_factor: float | np.ndarray | None = None,
    link="shannon",
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    exact_blocks: int | None = None,
    subbands: int = 1,
    interference: FadedInterference | None = None,
) -> Transfer:
    """Time to deliver ``bits`` to each user over block fading, vectorised over users.

    ``bits``, ``bandwidth_hz`` and ``mean_snr`` (linear, the SNR without small-scale
    fading) broadcast to one value per user. Block b of user u lasts ``coherence_s``
    and delivers ``bandwidth_hz·SE(mean_snr·g_ub)·coherence_s`` bits with
    ``g_ub = draw_fading(...)``; the transfer ends part-way through the first block
    that completes it: ``time = k·T_c + owed/rate_k``. ``link`` is a name from
    ``LINKS`` (``shannon``, ``truncated_shannon`` = TR 36.942 downlink,
    ``truncated_shannon_ul``) or a callable SNR -> bit/s/Hz.

    ``coherence_s = inf``: one draw per user for the whole transfer (today's model).
    ``fading = "none"``: the closed form bits / rate, no draws. A user with a mean SNR
    of 0 or no bandwidth is in outage at once (no draws are made for it).

    Draws: with ``coherence_s = inf``, one gain per user in user order, for every user
    (even with 0 bits), so the generator advances the same way whatever the payloads.
    Otherwise the gains of the users still transferring are drawn as matrices
    (users, blocks) in chunks, row-major, so a user's draws depend on the other
    users' (a seed still reproduces every result), but not their law: every user
    draws its first ``exact_blocks`` blocks (``MIN_EXACT_BLOCKS``) one by one, and a
    transfer still going after them ends after a renewal-theory number of blocks,
    ``R/m + sqrt(R·v/m³)·Z`` for R bits owed, m and v the mean and variance of its
    bits per block over the fading law (``block_bits_moments``), Z one standard
    normal draw per such user; m = 0 is an outage.

    ``interference`` (one per user, ``interference.FadedInterference``): ``mean_snr`` is then the signal over the
    noise alone, and each block (and subband) divides it by 1 + I, I drawn right after the block's gains.

    A link with a ``start`` method (``nr.OllaLink``) adapts block by block: each user's blocks go through its own
    loop (``blocks``, then its draws), and the renewal step takes the mean and variance of the blocks it drew.
    """
    _check_common(coherence_s, max_blocks)
    _check_subbands(subbands)
    _fading_args(fading, k_factor)
    se = _link(link)
    b, bw, snr = np.broadcast_arrays(
        _nonneg_finite("bits", bits, "bits"),
        _nonneg_finite("bandwidth_hz", bandwidth_hz, "Hz"),
        _snr_array(mean_snr),
    )
    if not np.all(np.isfinite(snr)):
        raise ValueError("mean_snr must be finite")
    shape = b.shape
    b, bw, snr = b.ravel().astype(float), bw.ravel().astype(float), snr.ravel().astype(float)
    n = b.size
    if isinstance(k_factor, np.ndarray) and k_factor.size != n:
        raise ValueError(f"k_factor has {k_factor.size} K-factors for {n} users")
    _check_interference(interference, n, fading, coherence_s)
    time = np.zeros(n)
    blocks = np.zeros(n, dtype=np.int64)
    zero_blocks = np.zeros(n, dtype=np.int64)
    outage = np.zeros(n, dtype=bool)
    todo = np.flatnonzero(b > 0)

    if fading == "none" or math.isinf(coherence_s):
        # One draw per user, payload or not (as physical.draw_fading), in user order.
        g = np.ones(todo.size) if fading == "none" else draw_fading(rng, n, fading, k_factor)[todo]
        rate = bw[todo] * se(snr[todo] * g)
        with np.errstate(divide="ignore"):
            t = np.where(rate > 0, b[todo] / np.where(rate > 0, rate, 1.0), math.inf)
        if math.isinf(coherence_s):
            used = np.ones(todo.size, dtype=np.int64)
        else:  # blocks needed at a constant rate; a rate of 0 would need them all
            needed = np.ceil(np.where(rate > 0, t, 0.0) / coherence_s)
            used = np.where(rate > 0, np.minimum(needed, max_blocks + 1), max_blocks).astype(np.int64)
            used = np.maximum(used, 1)
        late = (rate <= 0) | (used > max_blocks)
        time[todo] = np.where(late, math.inf, t)
        blocks[todo] = np.minimum(used, max_blocks)
        zero_blocks[todo] = np.where(rate <= 0, blocks[todo], 0)
        outage[todo] = late
        return Transfer(time.reshape(shape), blocks.reshape(shape), zero_blocks.reshape(shape), outage.reshape(shape))

    # A user with no bandwidth or a mean SNR of 0 can never deliver: outage without draws.
    dead = todo[(bw[todo] <= 0) | (snr[todo] <= 0)]
    time[dead], blocks[dead], zero_blocks[dead], outage[dead] = math.inf, max_blocks, max_blocks, True
    todo = todo[(bw[todo] > 0) & (snr[todo] > 0)]
    remaining = b.copy()
    mean_sinr = snr if interference is None else snr / (1.0 + interference.mean)
    mean_rate = bw * se(mean_sinr)
    adapt = se.start(mean_sinr) if hasattr(se, "start") else None
    used = 0
    drawn = min(max_blocks, exact_blocks or MIN_EXACT_BLOCKS)
    while todo.size and used < drawn:
        chunk = _chunk(remaining[todo], mean_rate[todo], coherence_s, todo.size * subbands, drawn - used)
        rate = bw[todo, None] * block_se(se, snr[todo], rng, chunk, fading, _users_k(k_factor, todo), subbands,
                                         _users_interference(interference, todo), adapt, todo)
        finished, k, owed, total = _crossing(rate * coherence_s, remaining[todo])
        zero = rate <= 0
        counted = np.where(finished[:, None], np.arange(chunk)[None, :] <= k[:, None], True)
        zero_blocks[todo] += np.sum(zero & counted, axis=1)
        done, going = todo[finished], todo[~finished]
        k_done = k[finished]
        rate_k = np.take_along_axis(rate[finished], k_done[:, None], axis=1)[:, 0]
        if adapt is not None:
            share = counted.astype(float)
            share[np.flatnonzero(finished), k_done] = owed[finished] / (rate_k * coherence_s)
            adapt.count(todo, share)
        time[done] += k_done * coherence_s + owed[finished] / rate_k
        blocks[done] += k_done + 1
        time[going] += chunk * coherence_s
        blocks[going] += chunk
        remaining[going] -= total[~finished]
        todo = going
        used += chunk
    if todo.size and used < max_blocks:
        # The rest is a first passage of i.i.d. block bits (mean m, variance v) past what is owed: for R owed bits
        # it takes R/m + sqrt(R·v/m³)·Z blocks (renewal central limit theorem), drawn once per user.
        if adapt is None:
            mean, var, empty = block_bits_moments(bw[todo], snr[todo], coherence_s, fading, _users_k(k_factor, todo), se, subbands,
                                                  _users_interference(interference, todo))
        else:
            mean, var, empty = adapt.moments(todo, bw[todo] * coherence_s)
        owed, served = remaining[todo], mean > 0
        m = np.where(served, mean, 1.0)
        spread = np.sqrt(owed * var / m**3) * rng.standard_normal(todo.size)
        more = np.where(served, np.maximum(owed / m + spread, 0.0), math.inf)
        fits = used + more <= max_blocks
        done = todo[fits]
        time[done] += more[fits] * coherence_s
        blocks[done] += np.ceil(more[fits]).astype(np.int64)
        zero_blocks[done] += np.rint(empty[fits] * more[fits]).astype(np.int64)
        if adapt is not None:
            adapt.extend(done, more[fits])
        todo = todo[~fits]
    time[todo] = math.inf
    outage[todo] = True
    use = (None, None) if adapt is None else tuple(value.reshape(shape) for value in adapt.use())
    return Transfer(time.reshape(shape), blocks.reshape(shape), zero_blocks.reshape(shape), outage.reshape(shape), *use)


@lru_cache(maxsize=32)
def _fading_points(fading: str, k_factor: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Gains of the fading law at ``TAIL_POINTS`` probability midpoints, and the mass each stands for."""
    if fading == "none":
        return np.ones(1), np.ones(1)
    half = TAIL_POINTS // 2
    tail = np.concatenate([np.linspace(1.0, 1e-3, half + 1), np.logspace(-3, -15, half + 1)[1:], [0.0]])
    weight = -np.diff(tail)
    survival = (tail[:-1] + tail[1:]) / 2.0
    if fading == "rayleigh":
        gain = -np.log(survival)
    else:
        from scipy import stats  # seconds to import; only Rician fading needs it, and reading a scenario must not pay it

        gain = stats.ncx2.isf(survival, 2, 2.0 * k_factor) / (2.0 * (k_factor + 1.0))
    return gain, weight


SUBBAND_SAMPLES = 4096
"""Blocks of ``subbands`` independent gains (a fixed draw) over which ``block_bits_moments`` averages when a block
has several subbands."""


def block_se(se, mean_snr: np.ndarray, rng: np.random.Generator, blocks: int, fading: str, k_factor: float | np.ndarray | None,
             subbands: int = 1, interference: FadedInterference | None = None, adapt=None, users: np.ndarray | None = None) -> np.ndarray:
    """``[users, blocks]`` spectral efficiency of fading blocks: one gain a block (flat fading), or ``subbands``
    independent gains a block, each subband carrying its share of the band at its own SNR (the mean of their
    efficiencies). Draws: one ``draw_fading`` of shape (users, blocks[, subbands]), row-major; with
    ``interference``, then one interference draw of the same shape (``FadedInterference.draw``). ``adapt``: the
    transfer's link adaptation loops (``nr.OllaRun``, flat blocks), rows ``users`` of it, which then makes its own
    draws."""
    snr = np.asarray(mean_snr, dtype=float)[:, None]
    shape = (snr.shape[0], blocks) if subbands == 1 else (snr.shape[0], blocks, subbands)
    gains = draw_fading(rng, shape, fading, k_factor)
    sinr = snr.reshape(-1, *(1,) * (len(shape) - 1)) * gains if interference is None else interference.sinr(snr[:, 0], gains, rng)
    if adapt is not None:
        return adapt.blocks(users, sinr, rng)
    return se(sinr) if subbands == 1 else subband_se(se, sinr)


def subband_se(se, sinr: np.ndarray) -> np.ndarray:
    """The spectral efficiency of blocks of subbands ``[..., subbands]``: the link's own effective-SINR mapping when
    it has one (``nr.EesmLink``), else the mean of the subbands' efficiencies (parallel channels)."""
    mapping = getattr(se, "subbands_se", None)
    return mapping(sinr) if mapping is not None else se(sinr).mean(axis=-1)


def _users_interference(interference: FadedInterference | None, users: np.ndarray) -> FadedInterference | None:
    return None if interference is None else interference.subset(users)


def _check_interference(interference: FadedInterference | None, users: int, fading: str, coherence_s: float) -> None:
    if interference is None:
        return
    if not isinstance(interference, FadedInterference) or interference.mean.shape != (users,):
        raise ValueError(f"interference must be a FadedInterference of one entry per user ({users})")
    if fading == "none" or math.isinf(coherence_s):
        raise ValueError("faded interference needs block fading (finite coherence_s) and a fading model other than 'none'")


def block_bits_moments(
    bandwidth_hz, mean_snr, coherence_s: float, fading: str = "rayleigh", k_factor: float | np.ndarray | None = None, link="shannon",
    subbands: int = 1, interference: FadedInterference | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per user, the mean and variance of the bits one fading block delivers, ``B·SE(γ̄·g)·T_c`` over the fading
    law of g, and the probability that it delivers none (an outage block): sums over ``_fading_points`` for flat
    blocks; over a fixed draw of ``SUBBAND_SAMPLES`` blocks (seeded apart from the run's draws) with subbands or with
    faded ``interference`` (one fixed Gamma sample per interference shape)."""
    _fading_args(fading, k_factor)
    se = _link(link)
    bw, snr = np.broadcast_arrays(np.asarray(bandwidth_hz, dtype=float), np.asarray(mean_snr, dtype=float))
    if isinstance(k_factor, np.ndarray):  # one K per user: each class of users by its own law
        if k_factor.size != bw.size:
            raise ValueError(f"k_factor has {k_factor.size} K-factors for {bw.size} users")
        mean, var, empty = np.empty(bw.size), np.empty(bw.size), np.empty(bw.size)
        for k in np.unique(k_factor).tolist():
            users = np.flatnonzero(k_factor == k)
            mean[users], var[users], empty[users] = block_bits_moments(
                bw.ravel()[users], snr.ravel()[users], coherence_s, fading, k, se, subbands,
                _users_interference(interference, users))
        return mean, var, empty
    if interference is not None or subbands > 1:
        bw, snr = bw.ravel(), snr.ravel()

        def compute(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            if interference is None:
                return _subband_moments(bw[rows], snr[rows], coherence_s, fading, k_factor, se, subbands)
            return _faded_interference_moments(bw[rows], snr[rows], coherence_s, fading, k_factor, se, subbands, interference.subset(rows))

        return _remembered(se, (coherence_s, fading, k_factor, subbands), bw, snr, interference, compute)
    gain, weight = _fading_points(fading, k_factor)
    mean, square, empty = np.empty(bw.size), np.empty(bw.size), np.empty(bw.size)
    step = max(1, _CHUNK_ELEMENTS // gain.size)
    for start in range(0, bw.size, step):
        part = slice(start, start + step)
        bits = bw.ravel()[part, None] * se(snr.ravel()[part, None] * gain[None, :]) * coherence_s
        mean[part] = bits @ weight
        square[part] = (bits * bits) @ weight
        empty[part] = (bits <= 0) @ weight
    return mean, np.maximum(square - mean * mean, 0.0), empty


_MOMENTS: dict[int, tuple[object, dict]] = {}
"""Per link (by identity, the link held with its table so the identity is not reused): a user's block-bit moments by
its settings, bandwidth, mean SNR and interference law (``_remembered``)."""
MOMENTS_KEPT = 1 << 20
"""Entries a link's table keeps before it is emptied (about 200 MB at most)."""


def _remembered(se, settings: tuple, bw: np.ndarray, snr: np.ndarray, interference: FadedInterference | None, compute):
    """``compute(rows)``'s moments for the users not seen before, the others' from the link's table. Exact: with
    subbands or faded interference each user's moments are sums over its own row of fixed samples, the same
    numbers whichever users share the call, and a long transfer's users come back round after round (0.5 s of a
    10,000-user faded round, ``benchmarks/bench_multicell.py``)."""
    entry = _MOMENTS.get(id(se))
    if entry is None or entry[0] is not se:
        entry = _MOMENTS[id(se)] = (se, {})
    table = entry[1]
    columns = [bw.tolist(), snr.tolist()]
    if interference is not None:
        columns += [interference.shape.tolist(), interference.scale.tolist()]
    keys = [(settings, *row) for row in zip(*columns)]
    missing = [row for row, key in enumerate(keys) if key not in table]
    if len(table) + len(missing) > MOMENTS_KEPT:
        table.clear()
        missing = list(range(len(keys)))
    if missing:
        mean, var, empty = compute(np.array(missing, dtype=np.int64))
        table.update(zip((keys[row] for row in missing), zip(mean.tolist(), var.tolist(), empty.tolist())))
    values = np.array([table[key] for key in keys], dtype=float).reshape(len(keys), 3)
    return values[:, 0].copy(), values[:, 1].copy(), values[:, 2].copy()


def _subband_moments(bw: np.ndarray, snr: np.ndarray, coherence_s: float, fading: str, k_factor, se, subbands: int):
    """``block_bits_moments`` of blocks of ``subbands`` subbands: over ``SUBBAND_SAMPLES`` fixed blocks of gains."""
    gains = draw_fading(np.random.default_rng(0), (SUBBAND_SAMPLES, subbands), fading, k_factor)
    mean, square, empty = np.empty(bw.size), np.empty(bw.size), np.empty(bw.size)
    step = max(1, _CHUNK_ELEMENTS // gains.size)
    for start in range(0, bw.size, step):
        part = slice(start, start + step)
        bits = bw[part, None] * subband_se(se, snr[part, None, None] * gains[None]) * coherence_s
        mean[part], square[part], empty[part] = bits.mean(axis=1), (bits * bits).mean(axis=1), (bits <= 0).mean(axis=1)
    return mean, np.maximum(square - mean * mean, 0.0), empty


def _faded_interference_moments(bw: np.ndarray, snr: np.ndarray, coherence_s: float, fading: str, k_factor, se, subbands: int,
                                interference: FadedInterference) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``block_bits_moments`` under faded interference: over ``SUBBAND_SAMPLES`` fixed blocks of gains and, per
    Gamma shape of the users' interference, one fixed standard Gamma sample (seeded apart from the run's draws)."""
    gains = draw_fading(np.random.default_rng(0), (SUBBAND_SAMPLES, subbands), fading, k_factor)
    mean, square, empty = np.empty(bw.size), np.empty(bw.size), np.empty(bw.size)
    step = max(1, _CHUNK_ELEMENTS // gains.size)
    for shape in np.unique(interference.shape).tolist():
        users = np.flatnonzero(interference.shape == shape)
        unit = np.random.default_rng(1).standard_gamma(shape, size=gains.shape)
        for start in range(0, users.size, step):
            part = users[start : start + step]
            sinr = snr[part, None, None] * gains[None] / (1.0 + interference.scale[part, None, None] * unit[None])
            bits = bw[part, None] * (se(sinr[..., 0]) if subbands == 1 else subband_se(se, sinr)) * coherence_s
            mean[part], square[part], empty[part] = bits.mean(axis=1), (bits * bits).mean(axis=1), (bits <= 0).mean(axis=1)
    return mean, np.maximum(square - mean * mean, 0.0), empty


# --------------------------------------------------------------------------- multicast


def worst_user_rate(rates, axis: int = 0) -> np.ndarray:
    """The weakest receiver's rate along ``axis`` (receivers): today's multicast policy."""
    return np.min(np.asarray(rates, dtype=float), axis=axis)


def coverage_rate(rates, q: float, axis: int = 0) -> np.ndarray:
    """The highest rate that at least ceil(q·n) of the n receivers along ``axis`` can decode.

    That is the (n - ceil(q·n) + 1)-th smallest rate: q = 1 gives the minimum
    (``worst_user_rate``); q = 0.5 the median receiver's rate (upper median).
    """
    if isinstance(q, bool) or not (0 < q <= 1):
        raise ValueError(f"q must be in (0, 1] (the fraction of receivers the stream's rate must serve), got {q!r}")
    r = np.asarray(rates, dtype=float)
    n = r.shape[axis]
    if n == 0:
        raise ValueError("coverage_rate needs at least one receiver")
    index = n - max(1, math.ceil(q * n - 1e-12))
    return np.take(np.partition(r, index, axis=axis), index, axis=axis)


@dataclass(frozen=True)
class MulticastTransfer:
    """Result of ``multicast_transfer`` for one stream.

    ``time_s``: seconds to send the stream (``inf`` in outage); ``blocks``: blocks used;
    ``rate_bps``: the stream's effective rate, bits / time (0 in outage);
    ``repair_bits``: per receiver, the bits it missed (blocks sent above its rate), to be
    repaired by unicast; all 0 under ``worst_user``; ``outage``: not delivered within
    ``max_blocks`` (then ``repair_bits`` counts the blocks that were sent).
    """

    time_s: float
    blocks: int
    rate_bps: float
    repair_bits: np.ndarray
    outage: bool


def multicast_transfer(
    bits: float,
    bandwidth_hz: float,
    mean_snr,
    rng: np.random.Generator,
    coherence_s: float,
    fading: str = "rayleigh",
    k_factor: float | np.ndarray | None = None,
    link="shannon",
    policy: str = "worst_user",
    q: float = 1.0,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    exact_blocks: int | None = None,
    subbands: int = 1,
    interference: FadedInterference | None = None,
) -> MulticastTransfer:
    """One multicast stream of ``bits`` to receivers with mean SNRs ``mean_snr`` over block fading.

    In every block each receiver draws its own fading gain; the stream's rate in that
    block is ``worst_user_rate`` (``policy="worst_user"``) or ``coverage_rate(·, q)``
    (``policy="coverage"``) of the receivers' rates, and it delivers rate·T_c bits
    (a rate of 0 delivers nothing). A receiver whose own rate in a block is below the
    stream's misses the bits sent in that block (only the part actually needed, in the
    last block); those are its ``repair_bits``. ``coherence_s = inf``: one draw per
    receiver for the whole stream. Draws: matrices (receivers, blocks), in chunks. ``interference``: as in
    ``transfer_time``, one per receiver.
    """
    _check_common(coherence_s, max_blocks)
    _check_subbands(subbands)
    _fading_args(fading, k_factor)
    if policy not in MULTICAST_POLICIES:
        raise ValueError(f"policy must be one of {', '.join(repr(p) for p in MULTICAST_POLICIES)}, got {policy!r}")
    if policy == "coverage":
        coverage_rate(np.zeros(1), q)  # validates q
    se = _link(link)
    bits_f = float(_nonneg_finite("bits", bits, "bits"))
    bw = float(_nonneg_finite("bandwidth_hz", bandwidth_hz, "Hz"))
    snr = np.atleast_1d(_snr_array(mean_snr)).ravel()
    if snr.size == 0:
        raise ValueError("mean_snr must name at least one receiver")
    if isinstance(k_factor, np.ndarray) and k_factor.size != snr.size:
        raise ValueError(f"k_factor has {k_factor.size} K-factors for {snr.size} receivers")
    if not np.all(np.isfinite(snr)):
        raise ValueError("mean_snr must be finite")
    n = snr.size
    _check_interference(interference, n, fading, coherence_s)

    def stream_rate(rates: np.ndarray) -> np.ndarray:
        return worst_user_rate(rates, axis=0) if policy == "worst_user" else coverage_rate(rates, q, axis=0)

    repair = np.zeros(n)
    if bits_f == 0:
        return MulticastTransfer(0.0, 0, 0.0, repair, False)

    if math.isinf(coherence_s):
        rates = bw * se(snr * draw_fading(rng, n, fading, k_factor))
        s = float(stream_rate(rates[:, None])[0])
        if s <= 0:
            return MulticastTransfer(math.inf, 1, 0.0, repair, True)
        repair[rates < s] = bits_f
        return MulticastTransfer(bits_f / s, 1, s, repair, False)

    remaining = np.array([bits_f])
    time = 0.0
    blocks = 0
    mean_snr_seen = snr if interference is None else snr / (1.0 + interference.mean)
    mean_rate = np.array([float(stream_rate((bw * se(mean_snr_seen))[:, None])[0])])
    drawn = min(max_blocks, exact_blocks or exact_blocks_for(n))
    while blocks < drawn:
        chunk = _chunk(remaining, np.maximum(mean_rate, 1e-300), coherence_s, n * subbands, drawn - blocks)
        rates = bw * block_se(se, snr, rng, chunk, fading, k_factor, subbands, interference)
        s = stream_rate(rates)  # (chunk,)
        sent = s * coherence_s
        finished, k, owed, total = _crossing(sent[None, :], remaining)
        if finished[0]:
            k0 = int(k[0])
            sent_used = sent[: k0 + 1].copy()
            sent_used[k0] = owed[0]
            repair += np.sum((rates[:, : k0 + 1] < s[None, : k0 + 1]) * sent_used[None, :], axis=1)
            time += k0 * coherence_s + owed[0] / s[k0]
            blocks += k0 + 1
            return MulticastTransfer(time, blocks, bits_f / time, repair, False)
        repair += np.sum((rates < s[None, :]) * sent[None, :], axis=1)
        remaining = remaining - total
        time += chunk * coherence_s
        blocks += chunk
    delivered = bits_f - float(remaining[0])
    more = float(remaining[0]) / (delivered / blocks) if delivered > 0 else math.inf
    if blocks < max_blocks and blocks + more <= max_blocks:
        repair *= bits_f / delivered
        time += more * coherence_s
        return MulticastTransfer(time, blocks + math.ceil(more), bits_f / time, repair, False)
    return MulticastTransfer(math.inf, blocks, 0.0, repair, True)
