"""NetworkModel: turns a CommPlan into a RoundTiming under one SystemProfile.

Draw order per round (so equal seeds give equal rounds whatever the schedule):
one exponential per client id 0..n-1 for compute, then, in physical mode with
Rayleigh fading, one downlink gain per client and (FDD only; TDD is reciprocal)
one uplink gain per client. Draws do not depend on the plan, so two plans timed
with equally seeded generators see the same compute times and channels.
"""

from __future__ import annotations

import numpy as np

from ..seam import AnalogAggregation, CommPlan, RoundTiming, StreamDelivery, UplinkChannel, frozen
from . import physical as phy
from . import prb
from .link import draw_fading as link_draw_fading
from .over_the_air import analog_airtime_s, analog_cells, analog_timing, silent_plan, truncated_inversion
from .compute import client_compute_parameters, draw_compute_times, expected_max_compute, scaled_parameters
from .profile import SystemProfile
from .topology import CellDrop, drop_federation
from .rounds import (
    RoundInputs,
    RoundTimes,
    fifo_landings,
    order_streams,
    phased_closed_form,
    pipelined_closed_form,
    simulate,
)


class NetworkModel:
    """Times rounds for ``num_clients`` clients (ids 0..num_clients-1).

    ``rng`` is used once, here, for static draws (user positions in physical mode).
    ``record_events`` fills ``RoundTiming.events`` (always via SimPy). Without it,
    and unless ``closed_form=False``, rounds skip the event loop: their times are
    closed-form given the draws, and tests prove them equal to SimPy float for float.
    With ``profile.backend == 'analytic'`` every round returns the expected timing
    (no draw; ``rng`` is not touched).
    """

    def __init__(
        self,
        profile: SystemProfile,
        num_clients: int,
        rng: np.random.Generator,
        *,
        record_events: bool = False,
        closed_form: bool = True,
    ) -> None:
        if not isinstance(profile, SystemProfile):
            raise ValueError(f"profile must be a SystemProfile, got {type(profile).__name__}")
        if isinstance(num_clients, bool) or not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
            raise ValueError(f"num_clients must be an integer >= 1, got {num_clients!r}")
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self.profile = profile
        self.num_clients = int(num_clients)
        self.record_events = record_events
        self.closed_form = closed_form
        self.t_min, self.mu = client_compute_parameters(profile, self.num_clients)
        self.distances_m: np.ndarray | None = None
        self.path_loss_db: np.ndarray | None = None
        self.uplink_loss_db: np.ndarray | None = None
        self.cell: CellDrop | None = None
        self.los: np.ndarray | None = None
        """Each user's TR 38.901 LOS state to its serving cell (None under ``log_distance``): Rician fading applies
        to LOS users only (``physical.k_factor``)."""
        self._ergodic_uplink: np.ndarray | None = None  # ``uplink_channel``'s mean rates, computed once
        self._block_use: tuple[np.ndarray, np.ndarray] | None = None  # ``nr`` over blocks: modal MCS, retransmissions per bit
        self._prb_share: np.ndarray | None = None  # a PRB split over fading blocks: every user's ``prb.share_table``, computed once
        self.signal_loss_db: tuple[np.ndarray, np.ndarray] | None = None
        """With faded interference, each direction's loss without the interference's rise (the signal alone)."""
        if profile.physical is not None and profile.physical.topology is not None:
            # Interference enters as a rise of each direction's loss: the same SINR as S / (N + I).
            self.cell = drop_federation(profile.physical, profile.physical.topology, self.num_clients, rng)
            self.path_loss_db = self.cell.coupling_loss_db + self.cell.dl_rise_db
            self.uplink_loss_db = self.cell.coupling_loss_db + self.cell.ul_rise_db
            self.los = self.cell.los
        elif profile.physical is not None:
            self.distances_m = phy.drop_users(profile.physical, self.num_clients, rng)
            self.path_loss_db, self.los = phy.static_large_scale(profile.physical, self.distances_m, rng)
            self.uplink_loss_db = self.path_loss_db
        if profile.physical is not None and profile.physical.ul_p0_dbm is not None:
            # A phone below full power loses that much of its uplink SNR: it enters as extra loss.
            serving = self.cell.coupling_loss_db if self.cell is not None else self.path_loss_db
            self.uplink_loss_db = self.uplink_loss_db + (profile.physical.ue_power_dbm - profile.physical.uplink_power_dbm(serving))
        if self.cell is not None and self.cell.dl_interference is not None:
            self.signal_loss_db = (self.path_loss_db - self.cell.dl_rise_db, self.uplink_loss_db - self.cell.ul_rise_db)

    def prb_link(self, clients: np.ndarray, ul_gain: np.ndarray | None = None) -> prb.PrbLink:
        """The ``clients``' uplink power and SINR per PRB count (``prb.PrbLink``): their whole-carrier SINR at the mean
        interference (times this round's held gain ``ul_gain`` when given) and their loss to their serving cell."""
        channel = self.profile.physical
        serving = self.cell.coupling_loss_db if self.cell is not None else self.path_loss_db
        snr = phy.link_snr(channel, "ul", self.uplink_loss_db[clients])
        return prb.prb_link(channel, snr if ul_gain is None else snr * ul_gain, serving[clients])

    def _block_prb_share(self) -> np.ndarray:
        """Every user's ``prb.share_table`` over block fading: the rates of its mean SINRs per PRB count averaged over
        its flat fading law (``prb.ergodic_se``, each LOS class by its own K), computed once."""
        if self._prb_share is None:
            channel = self.profile.physical
            everyone = np.arange(self.num_clients)
            link_all = self.prb_link(everyone)
            k = phy.k_factor(channel, self.los)
            table = np.empty((self.num_clients, link_all.prbs + 1))
            for value in (np.unique(k).tolist() if isinstance(k, np.ndarray) else [k]):
                users = np.flatnonzero(k == value) if isinstance(k, np.ndarray) else everyone
                part = prb.prb_link(channel, link_all.snr_full[users], (self.cell.coupling_loss_db if self.cell is not None else self.path_loss_db)[users])
                table[users] = prb.share_table(part, prb.ergodic_se(phy.link_model(channel, "ul"), channel.fading, value))
            self._prb_share = table
        return self._prb_share

    def time_round(self, plan: CommPlan, rng: np.random.Generator) -> RoundTiming:
        self._check_plan(plan)
        if self.profile.backend == "analytic":
            return expected_timing(self.profile, plan, self.t_min, self.mu)
        inputs = self.draw_round(plan, rng)
        profile = self.profile
        shortcut = self.closed_form and not self.record_events
        uplink = profile.physical.uplink if profile.physical is not None else "orthogonal"
        if shortcut and profile.schedule == "phased":
            times = phased_closed_form(inputs, channels=profile.channels, deadline=profile.deadline, uplink=uplink)
        elif shortcut:
            times = pipelined_closed_form(
                inputs, duplex=profile.duplex, channels=profile.channels, deadline=profile.deadline, uplink=uplink
            )
        else:
            times = simulate(
                inputs,
                schedule=profile.schedule,
                duplex=profile.duplex,
                channels=profile.channels,
                deadline=profile.deadline,
                record=self.record_events,
                uplink=uplink,
            )
        return to_round_timing(
            inputs, times, profile.deadline, profile.time_unit, profile.schedule, profile.duplex, uplink
        )

    def draw_round(self, plan: CommPlan, rng: np.random.Generator) -> RoundInputs:
        """Every random draw of one round, turned into durations."""
        self._check_plan(plan)
        profile, n = self.profile, self.num_clients
        clients = np.array(sorted(plan.work), dtype=int)
        work = np.array([plan.work[c] for c in clients.tolist()])
        compute_all = draw_compute_times(self.t_min, self.mu, rng)
        compute = compute_all[clients] * work if profile.scale_compute_with_work else compute_all[clients]
        uplink_payload = np.array([plan.uplink.get(c, 0.0) for c in clients.tolist()])
        streams = order_streams(plan.streams, profile.stream_order)
        members = tuple(np.searchsorted(clients, sorted(s.receivers)) for s in streams)
        labels = tuple(s.label or str(k) for k, s in enumerate(streams))
        payloads = np.array([s.payload for s in streams])
        deliveries = ()
        mcs = retransmissions = ul_share = ul_prb = None
        if profile.physical is None:
            stream_durations = payloads * profile.t_dl
            upload = uplink_payload * profile.rho * profile.t_dl
        elif profile.physical.block_s is not None:
            bits_per_model = plan.model_params * profile.bits_per_parameter
            faded = None if self.signal_loss_db is None else (self.cell.dl_interference, self.cell.ul_interference)
            dl_loss, ul_loss = self.signal_loss_db or (self.path_loss_db, self.uplink_loss_db)
            stream_durations, upload, deliveries, upload_use = phy.block_durations(
                profile.physical, dl_loss, ul_loss, members, payloads * bits_per_model,
                uplink_payload * bits_per_model, clients, rng, labels, self.los, faded,
            )
            if profile.physical.ul_scheduler != "time_share":
                ul_share, ul_prb = self._block_prb_share()[clients], self.prb_link(clients)
            if upload_use is not None:
                mcs, retransmissions = upload_use
            elif profile.physical.link == "nr":
                if self._block_use is None:
                    self._block_use = phy.uplink_block_use(profile.physical, phy.link_snr(profile.physical, "ul", self.uplink_loss_db), self.los)
                mcs = self._block_use[0][clients]
                retransmissions = np.rint(uplink_payload * bits_per_model * self._block_use[1][clients]).astype(np.int64)
        else:
            channel = profile.physical
            dl_gain = phy.draw_fading(channel, n, rng, self.los)
            ul_gain = dl_gain if profile.duplex == "tdd" else phy.draw_fading(channel, n, rng, self.los)
            dl_rate = phy.downlink_rates(channel, self.path_loss_db, dl_gain)[clients]
            ul_rate = phy.uplink_rates(channel, self.uplink_loss_db, ul_gain)[clients]
            bits_per_model = plan.model_params * profile.bits_per_parameter
            weakest = np.array([dl_rate[m].min() for m in members])
            stream_durations = _duration(payloads * bits_per_model, weakest) if streams else np.zeros(0)
            upload = _duration(uplink_payload * bits_per_model, ul_rate)
            if channel.ul_scheduler != "time_share":
                ul_prb = self.prb_link(clients, ul_gain[clients])
                ul_share = prb.share_table(ul_prb, phy.link_model(channel, "ul"))
            if channel.link == "nr":
                ul_snr = phy.link_snr(channel, "ul", self.uplink_loss_db[clients]) * ul_gain[clients]
                mcs, retransmissions = phy.uplink_held_use(channel, ul_snr, uplink_payload * bits_per_model)
                stream_durations, upload = phy.add_held_harq_tails(
                    channel, self.path_loss_db[clients], self.uplink_loss_db[clients], dl_gain[clients], ul_gain[clients], members,
                    stream_durations, upload,
                )
            deliveries = tuple(
                StreamDelivery(label, len(m), float(bits), float(seconds), float(rate))
                for label, m, bits, seconds, rate in zip(
                    labels, members, (payloads * bits_per_model).tolist(), np.asarray(stream_durations).tolist(), weakest.tolist()
                )
            )
        return RoundInputs(
            clients=clients,
            stream_members=members,
            stream_labels=labels,
            stream_durations=np.asarray(stream_durations, dtype=float),
            compute=compute,
            upload=upload,
            deliveries=deliveries,
            mcs=mcs,
            retransmissions=retransmissions,
            ul_share=ul_share,
            ul_prb=ul_prb,
            ul_scheduler=profile.physical.ul_scheduler if profile.physical is not None else "time_share",
        )

    def uplink_channel(self, rng: np.random.Generator) -> UplinkChannel:
        """Every client's uplink SINR and rate this round, as the base station measures them before it schedules.

        ``rng`` must be seeded as the round's own generator (a fresh copy: ``time_round`` draws from its own),
        so the draws are the round's: the compute times first, then, with fading held for the round, the same
        downlink and uplink gains ``time_round`` makes, so the measured SINR is the one the upload sees. With
        block fading (``coherence_s`` / ``ue_speed_mps``) the upload starts many coherence blocks after the
        measurement, so the measured gain is one pilot block from a child of ``rng`` (``Generator.spawn``),
        independent of the upload's blocks: a scheduler then gains only through the large-scale loss.
        Nothing here changes a round's draws: ``time_round`` is called with its own generator as before.
        """
        channel = self.profile.physical
        if channel is None or self.profile.backend == "analytic":
            raise ValueError("the uplink channel state needs a physical channel with random draws (physical: set, backend: des)")
        n = self.num_clients
        draw_compute_times(self.t_min, self.mu, rng)
        if channel.block_s is None:
            dl_gain = phy.draw_fading(channel, n, rng, self.los)
            ul_gain = dl_gain if self.profile.duplex == "tdd" else phy.draw_fading(channel, n, rng, self.los)
        else:
            ul_gain = phy.draw_fading(channel, n, rng.spawn(1)[0], self.los)
        if self._ergodic_uplink is None:
            self._ergodic_uplink = phy.ergodic_uplink_rates(channel, self.uplink_loss_db, self.los)
        mean_snr = phy.link_snr(channel, "ul", self.uplink_loss_db)
        return UplinkChannel(
            snr=(mean_snr * ul_gain).tolist(),
            rate_bps=phy.uplink_rates(channel, self.uplink_loss_db, ul_gain).tolist(),
            mean_snr=mean_snr.tolist(),
            mean_rate_bps=self._ergodic_uplink.tolist(),
        )

    def analog_aggregation(
        self, rng: np.random.Generator, scheduled: np.ndarray, threshold_db: float | None, noise: bool, model_params: int
    ) -> AnalogAggregation:
        """Over-the-air aggregation of ``scheduled`` this round (``over_the_air.truncated_inversion``; ``rng`` seeded
        as the round's generator, a fresh copy). Fading held for the round: on the SNRs of ``uplink_channel(rng)``,
        the round's own draws. Block fading: per cell (``over_the_air.analog_cells``), each device's gain in each
        (block, subband) drawn from the second child of ``rng`` (``Generator.spawn``; the first is the scheduler's
        pilot block), after the round's compute times, as one ``draw_fading`` of shape (clients, blocks, subbands)."""
        channel = self.profile.physical
        airtime = analog_airtime_s(channel, model_params)
        if channel.block_s is None:
            snr = np.asarray(self.uplink_channel(rng).snr)
            return truncated_inversion(snr, scheduled, threshold_db, noise, airtime)
        stops = analog_cells(channel, model_params)
        draw_compute_times(self.t_min, self.mu, rng)
        n, subbands = self.num_clients, channel.subbands
        gains = link_draw_fading(rng.spawn(2)[1], (n, len(stops) // subbands, subbands), channel.fading, phy.k_factor(channel, self.los))
        snr = phy.link_snr(channel, "ul", self.uplink_loss_db)[:, None] * gains.reshape(n, -1)
        return truncated_inversion(snr.T, scheduled, threshold_db, noise, airtime, stops)

    def time_analog_round(self, plan: CommPlan, rng: np.random.Generator, analog: AnalogAggregation) -> RoundTiming:
        """``time_round`` with the uploads replaced by one analog transmission (``over_the_air.analog_timing``)."""
        return analog_timing(self.time_round(silent_plan(plan), rng), analog)

    def nominal_downlink_rates(self) -> np.ndarray | None:
        """Each client's downlink rate (bit/s) from its static path loss; None without a physical channel.
        What channel-aware stream formation knows before a round. Shannon and truncated Shannon: the rate at
        unit fading gain. ``nr``: the mean rate over the fading law (``physical.ergodic_downlink_rates``),
        since a user whose mean SINR is below the lowest MCS has rate 0 at unit gain yet gets bits in good
        blocks."""
        channel = self.profile.physical
        if channel is None:
            return None
        if channel.link == "nr":
            return phy.ergodic_downlink_rates(channel, self.path_loss_db, self.los)
        return phy.downlink_rates(channel, self.path_loss_db, np.ones(self.num_clients))

    def nominal_downlink_snr_db(self) -> np.ndarray | None:
        """Each client's mean downlink SINR (dB) from its static path loss (and, in a multi-cell topology, the
        neighbours' interference), no fading; None without a physical channel."""
        channel = self.profile.physical
        if channel is None:
            return None
        snr = phy.link_snr(channel, "dl", self.path_loss_db)
        return 10.0 * np.log10(snr)

    def bits(self, plan: CommPlan) -> tuple[float, float]:
        """(downlink, uplink) bits: payload x model_params x bits_per_parameter; a multicast counts once."""
        per_model = plan.model_params * self.profile.bits_per_parameter
        return plan.downlink_payload * per_model, plan.uplink_payload * per_model

    def expected_round_time(self, plan: CommPlan) -> float:
        """The paper's closed form for this plan (see ``analytic_round_time``)."""
        self._check_plan(plan)
        return expected_timing(self.profile, plan, self.t_min, self.mu).t_end

    def _check_plan(self, plan: CommPlan) -> None:
        if not isinstance(plan, CommPlan):
            raise ValueError(f"plan must be a CommPlan, got {type(plan).__name__}")
        ids = np.fromiter(plan.work, dtype=np.int64, count=len(plan.work))
        outside = ids[(ids < 0) | (ids >= self.num_clients)]
        if len(outside):
            raise ValueError(
                f"plan names client {int(outside.min())}, but client ids are 0..{self.num_clients - 1} "
                f"(num_clients={self.num_clients})"
            )
        if self.profile.physical is not None and plan.model_params <= 0 and plan.work:
            raise ValueError(
                "plan.model_params must be > 0 with a physical channel "
                f"(bits = payload x model_params x bits_per_parameter), got {plan.model_params}"
            )


def _duration(bits: np.ndarray, rate_bps: np.ndarray) -> np.ndarray:
    """bits / rate: ``inf`` for bits at a rate of 0 (an outage), 0 for no bits, without numpy's warnings."""
    bits, rate = np.broadcast_arrays(np.asarray(bits, dtype=float), np.asarray(rate_bps, dtype=float))
    out = np.where(bits > 0, np.inf, 0.0)
    served = rate > 0
    np.divide(bits, rate, out=out, where=served)
    return out


def make_network(profile: SystemProfile, num_clients: int, rng: np.random.Generator, **options) -> NetworkModel:
    """The model for ``profile``; its ``backend`` decides between event-driven draws and expectations."""
    return NetworkModel(profile, num_clients, rng, **options)


def to_round_timing(
    inputs: RoundInputs, times: RoundTimes, deadline: float | None, time_unit: str, schedule: str = "phased",
    duplex: str = "fdd", uplink: str = "orthogonal",
) -> RoundTiming:
    """Who arrived and when the round ended: the last landing, cut at the deadline; and each
    participant's activities (see ``RoundTiming``), which the durations of ``inputs`` give. On a
    ``shared`` uplink an upload starts when it may (the uplink phase in ``phased``, its compute end in
    ``pipelined``, not before the downlink's end under TDD) and lands later than on its own, but it is
    on the air only for its turns: its duration on the whole carrier."""
    uploaded = times.t_uploaded
    landed = uploaded[np.isfinite(uploaded)]
    t_end = max(times.dl_end, float(landed.max()) if len(landed) else 0.0)
    on_time = np.isfinite(uploaded)
    if deadline is not None:
        on_time &= uploaded <= deadline
        t_end = min(t_end, deadline)
    ids = inputs.clients.tolist()
    compute_start = np.full(len(ids), times.dl_end) if schedule == "phased" else times.t_received
    shared_start = None
    if uplink == "shared":
        computed = times.t_computed
        if schedule == "phased":
            staying = computed <= deadline if deadline is not None else np.ones(len(ids), dtype=bool)
            shared_start = np.full(len(ids), float(computed[staying].max()) if staying.any() else times.dl_end)
        else:
            shared_start = computed if duplex == "fdd" else np.maximum(computed, times.dl_end)
    prb_use = {}
    if times.airtime is not None:
        prb_use = _prb_use(inputs, times, ids)
    return RoundTiming(
        t_received=frozen(ids, times.t_received.tolist()),
        t_computed=frozen(ids, times.t_computed.tolist()),
        t_uploaded=frozen(ids, uploaded.tolist()),
        arrived=frozenset(inputs.clients[on_time].tolist()),
        t_end=t_end,
        events=times.events,
        time_unit=time_unit,
        deliveries=inputs.deliveries,
        mcs=frozen(ids, inputs.mcs.tolist()) if inputs.mcs is not None else {},
        retransmissions=frozen(ids, inputs.retransmissions.tolist()) if inputs.retransmissions is not None else {},
        **activities(inputs.clients, inputs.stream_members, inputs.stream_durations, compute_start,
                     times.t_computed, uploaded, inputs.upload, shared_start, times.airtime),
        **prb_use,
    )


def _prb_use(inputs: RoundInputs, times: RoundTimes, ids: list[int]) -> dict:
    """Per uploader on a carrier split by PRBs: the PRBs it held on average while on the air (PRB-seconds over
    airtime), and its transmit power and SINR (the round's held gain, or the mean over fading blocks) with them."""
    sent = (times.airtime > 0) & np.isfinite(times.t_uploaded)
    index = np.flatnonzero(sent)
    prbs = times.prb_seconds[index] / times.airtime[index]
    link = inputs.ul_prb
    full = prb.PrbLink(link.prbs, link.carrier_over_prb, link.snr_full[index], link.power_full_dbm[index], link.p_max_dbm,
                       link.p0_dbm, link.alpha, None if link.path_loss_db is None else link.path_loss_db[index])
    sinr_db = 10.0 * np.log10(full.sinr(prbs))
    keys = [ids[i] for i in index.tolist()]
    return {
        "ul_prbs": frozen(keys, prbs.tolist()),
        "ul_power_dbm": frozen(keys, np.asarray(full.power_dbm(prbs), dtype=float).tolist()),
        "ul_sinr_db": frozen(keys, sinr_db.tolist()),
    }


def activities(
    clients: np.ndarray, members: tuple[np.ndarray, ...], durations: np.ndarray, compute_start: np.ndarray,
    computed: np.ndarray, uploaded: np.ndarray, upload: np.ndarray, shared_start: np.ndarray | None = None,
    airtime_override: np.ndarray | None = None,
) -> dict:
    """``RoundTiming``'s activity fields: streams back to back from time 0 in send order (the downlink
    never waits for the uplink); an upload holds the air for its duration (its ``upload`` seconds on
    the whole carrier: a shared carrier's round-robin turns add up to it; ``airtime_override`` where a carrier
    split by PRBs gives each upload its own time on the air) starting when it may start
    (``shared_start`` on a shared carrier, else its landing less its duration)."""
    ids = clients.tolist()
    ends = np.cumsum(durations).tolist()
    starts = [0.0, *ends[:-1]]
    receptions: list[tuple[tuple[float, float], ...]] = [()] * len(ids)
    for start, end, stream in zip(starts, ends, members):
        interval = ((start, end),)
        for i in stream.tolist():
            receptions[i] += interval
    sending = np.isfinite(uploaded) & (upload > 0)
    with np.errstate(invalid="ignore"):  # inf - inf for uploads in outage, which ``sending`` masks out
        if shared_start is None:
            upload_start = np.where(sending, np.maximum(uploaded - upload, computed), uploaded)
            airtime = np.where(sending, upload, 0.0)
        else:
            upload_start = np.where(sending, shared_start, uploaded)
            airtime = np.where(sending, upload if airtime_override is None else airtime_override, 0.0)
    return {
        "receptions": frozen(ids, receptions),
        "t_compute_start": frozen(ids, compute_start.tolist()),
        "t_upload_start": frozen(ids, upload_start.tolist()),
        "airtime": frozen(ids, airtime.tolist()),
    }


def expected_timing(profile: SystemProfile, plan: CommPlan, t_min: np.ndarray, mu: np.ndarray) -> RoundTiming:
    """Phased round with every random time at its mean, and the round end at the paper's
    k·T_dl + E[max_i T_i] + uplink term (uploads in client-id order on ``channels`` slots)."""
    if profile.physical is not None:
        raise ValueError("the analytic round time needs a normalised profile (physical must be null)")
    clients = np.array(sorted(plan.work), dtype=int)
    work = np.array([plan.work[c] for c in clients.tolist()])
    shift, rate = t_min[clients], mu[clients]
    if profile.scale_compute_with_work:
        shift, rate = scaled_parameters(shift, rate, work)
    streams = order_streams(plan.streams, profile.stream_order)
    ends = np.cumsum([s.payload * profile.t_dl for s in streams]) if streams else np.zeros(0)
    dl_end = float(ends[-1]) if len(ends) else 0.0
    position = {c: i for i, c in enumerate(clients.tolist())}
    t_received = np.zeros(len(clients))
    for end, stream in zip(ends.tolist(), streams):
        for c in stream.receivers:
            t_received[position[c]] = end
    t_computed = dl_end + shift + 1.0 / rate
    barrier = dl_end + expected_max_compute(shift, rate)
    upload = np.array([plan.uplink.get(c, 0.0) for c in clients.tolist()]) * profile.rho * profile.t_dl
    t_uploaded = t_computed.copy()
    uploaders = np.flatnonzero(upload > 0)
    t_uploaded[uploaders] = fifo_landings(barrier, upload[uploaders], profile.channels)
    t_end = max(barrier if len(clients) else dl_end, float(t_uploaded.max()) if len(clients) else 0.0)
    ids = clients.tolist()
    members = tuple(np.searchsorted(clients, sorted(s.receivers)) for s in streams)
    durations = np.array([s.payload * profile.t_dl for s in streams])
    return RoundTiming(
        t_received=dict(zip(ids, t_received.tolist())),
        t_computed=dict(zip(ids, t_computed.tolist())),
        t_uploaded=dict(zip(ids, t_uploaded.tolist())),
        arrived=frozenset(ids),
        t_end=t_end,
        time_unit=profile.time_unit,
        **activities(clients, members, durations, np.full(len(ids), dl_end), t_computed, t_uploaded, upload),
    )


def analytic_round_time(profile: SystemProfile, plan: CommPlan, num_clients: int) -> float:
    """Expected phased round time, no deadline: Σ_streams p·T_dl + E[max_i T_i] + uplink term.

    E[max] = T_min + H_m/mu for identical clients (exact integral otherwise). The
    uplink term is ρ·T_dl·Σ_i p_i on one channel, ρ·T_dl·max_i p_i with a channel
    per uploader, and FIFO list scheduling in client-id order in between (exact for
    equal payloads). ``schedule`` and ``deadline`` of ``profile`` are ignored: this
    is the phased reference to compare any DES result with.
    """
    if isinstance(num_clients, bool) or not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
        raise ValueError(f"num_clients must be an integer >= 1, got {num_clients!r}")
    t_min, mu = client_compute_parameters(profile, int(num_clients))
    outside = sorted(c for c in plan.work if not 0 <= c < num_clients)
    if outside:
        raise ValueError(f"plan names clients {outside}, but client ids are 0..{num_clients - 1}")
    return expected_timing(profile, plan, t_min, mu).t_end

