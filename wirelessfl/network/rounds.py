"""One round as plain numbers, and the two engines that time it (the system model of
user-centric-fl.txt §IV-C, made event-driven).

``RoundInputs`` holds a round after every random draw has been made (durations
only), so the SimPy engine of record and the closed-form paths can be run on
the *same* draws and compared exactly.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
import simpy

from .prb import light_speed, pf_shares, prb_landings


@dataclass(frozen=True)
class RoundInputs:
    """Participants are indexed 0..m-1 here; ``clients[i]`` is participant i's id."""

    clients: np.ndarray
    stream_members: tuple[np.ndarray, ...]
    stream_labels: tuple[str, ...]
    stream_durations: np.ndarray
    compute: np.ndarray
    upload: np.ndarray
    deliveries: tuple = ()
    mcs: np.ndarray | None = None
    """Per participant, the uplink MCS its upload used (``nr`` only; ``physical.uplink_held_use``, ``uplink_block_use``)."""
    retransmissions: np.ndarray | None = None
    """Per participant, the HARQ retransmissions of its upload (``nr`` only)."""
    ul_share: np.ndarray | None = None
    """With a shared carrier split by PRBs (``prb``), per participant its rate with k = 0..M PRBs over its rate with
    all M (``prb.share_table``); None for the time share."""
    ul_prb: object | None = None
    """The participants' ``prb.PrbLink`` (power and SINR per PRB count) with ``ul_share``."""
    ul_scheduler: str = "equal_prb"
    """How ``ul_share``'s PRBs are split (``prb.SCHEDULERS``)."""


@dataclass(frozen=True)
class RoundTimes:
    """Per-participant times; ``t_uploaded`` is inf for a client that dropped out."""

    t_received: np.ndarray
    t_computed: np.ndarray
    t_uploaded: np.ndarray
    dl_end: float
    events: tuple[tuple[float, str], ...] = ()
    airtime: np.ndarray | None = None
    """Per participant, its upload's time on the air when it is not its service time (PRB sharing); else None."""
    prb_seconds: np.ndarray | None = None
    """Per participant, the PRBs its upload held integrated over time (PRB sharing); else None."""


def simulate(
    inputs: RoundInputs, *, schedule: str, duplex: str, channels: int, deadline: float | None, record: bool,
    uplink: str = "orthogonal",
) -> RoundTimes:
    """The SimPy engine of record for both schedules.

    The base station sends streams one after another. Clients compute once their
    streams have arrived (``pipelined``) or once the whole downlink is over
    (``phased``); a client that cannot finish computing by the deadline drops out at
    once. Uploads queue FIFO (order of finishing) for ``channels`` slots; in
    ``phased`` a gate holds every slot until the last remaining client has
    computed. In ``pipelined``+``tdd`` the downlink and uplink share one medium:
    each stream needs every channel of it, and the base station goes ahead of
    uploaders that hold a slot but have not started (a priority queue that never
    holds more than 2·channels requests, so it stays cheap). As the base station
    claims the medium for its next stream as soon as one ends, no upload starts
    before the last stream has ended. With ``uplink='shared'`` there are no slots:
    uploads join one carrier (``_SharedCarrier``) once they may start (the gate in
    ``phased``, the downlink's end in ``pipelined``+``tdd``).
    """
    env = simpy.Environment()
    m = len(inputs.clients)
    ids = inputs.clients.tolist()
    compute = inputs.compute.tolist()
    upload = inputs.upload.tolist()
    log: list[tuple[float, str]] = []
    note = log.append if record else None
    phased = schedule == "phased"
    prb_share = inputs.ul_share if uplink == "shared" else None
    carrier = (_PrbCarrier(env, prb_share, m, inputs.ul_scheduler) if prb_share is not None else _SharedCarrier(env)) if uplink == "shared" else None
    uplink_open = env.event()
    uplink = simpy.Resource(env, capacity=channels)
    medium = (
        simpy.PriorityResource(env, capacity=channels)
        if schedule == "pipelined" and duplex == "tdd" and carrier is None else None
    )

    t_computed = [0.0] * m
    t_uploaded = [math.inf] * m
    # A client's streams have all arrived when the last of them in send order has;
    # one event per stream wakes its waiting clients in id order.
    last_stream = _arrivals(inputs)[1].tolist()
    delivered = [env.event() for _ in inputs.stream_members]
    delivered_at = [0.0] * len(delivered)
    nothing_to_wait_for = env.event().succeed()
    settled = [env.event() for _ in range(m)] if phased else None
    downlink_done = env.event()
    downlink_end = [0.0]

    if phased:
        gate = [uplink.request() for _ in range(channels)]

        def open_uplink():
            yield env.all_of(settled)
            if note:
                note((env.now, "uplink phase starts"))
            for hold in gate:
                uplink.release(hold)
            uplink_open.succeed()

        env.process(open_uplink())

    def base_station():
        for k, (label, members, duration) in enumerate(
            zip(inputs.stream_labels, inputs.stream_members, inputs.stream_durations.tolist())
        ):
            claims = [medium.request(priority=0) for _ in range(channels)] if medium is not None else []
            if claims:
                yield env.all_of(claims)
            yield env.timeout(duration)
            for claim in claims:
                medium.release(claim)
            if note:
                note((env.now, f"stream {label} delivered to {[ids[i] for i in members.tolist()]}"))
            delivered_at[k] = env.now
            delivered[k].succeed()
        downlink_end[0] = env.now
        downlink_done.succeed()
        if not phased and duplex == "tdd":
            uplink_open.succeed()

    def client(i: int):
        if phased:
            yield downlink_done
        else:
            yield delivered[last_stream[i]] if last_stream[i] >= 0 else nothing_to_wait_for
        t_computed[i] = env.now + compute[i]
        if deadline is not None and t_computed[i] > deadline:
            if note:
                note((env.now, f"client {ids[i]} drops out: cannot compute by the deadline"))
            if settled:
                settled[i].succeed()
            return
        yield env.timeout(compute[i])
        if settled:
            settled[i].succeed()
        if note:
            note((env.now, f"client {ids[i]} computed"))
        if upload[i] == 0:
            t_uploaded[i] = env.now
            return
        if carrier is not None:
            if not uplink_open.processed:
                yield uplink_open
            if math.isinf(upload[i]):
                return
            yield carrier.join(upload[i], i)
            t_uploaded[i] = env.now
            if note:
                note((env.now, f"client {ids[i]} uploaded"))
            return
        with uplink.request() as slot:
            yield slot
            if medium is not None:
                with medium.request(priority=1) as air:
                    yield air
                    yield env.timeout(upload[i])
            else:
                yield env.timeout(upload[i])
        t_uploaded[i] = env.now
        if note:
            note((env.now, f"client {ids[i]} uploaded"))

    if not phased and duplex == "fdd":
        uplink_open.succeed()
    env.process(base_station())
    for i in range(m):
        env.process(client(i))
    env.run()
    return RoundTimes(
        t_received=np.array([delivered_at[k] if k >= 0 else 0.0 for k in last_stream]),
        t_computed=np.array(t_computed),
        t_uploaded=np.array(t_uploaded),
        dl_end=downlink_end[0],
        events=tuple(log),
        airtime=carrier.airtime if isinstance(carrier, _PrbCarrier) else None,
        prb_seconds=carrier.prb_seconds if isinstance(carrier, _PrbCarrier) else None,
    )


class _SharedCarrier:
    """One uplink carrier shared equally by the uploads in progress, on SimPy's clock.

    Each upload needs ``service`` seconds of the whole carrier; while m are in
    progress each is served at 1/m. A server process sleeps until the upload with the
    least service left would finish, or until one joins, and charges everyone
    ``elapsed / m`` on every wake-up. ``shared_landings`` is its closed form.
    """

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.left: dict[int, list] = {}
        self.joined = env.event()
        self.last = 0.0
        self.count = 0
        self.who: dict[int, int] = {}
        env.process(self._serve())

    def join(self, service: float, who: int = -1) -> simpy.Event:
        self._charge()
        landed = self.env.event()
        self.left[self.count] = [float(service), landed, float(service)]
        self.who[self.count] = who
        self.count += 1
        if not self.joined.triggered:
            self.joined.succeed()
        return landed

    def _charge(self) -> None:
        elapsed, self.last = self.env.now - self.last, self.env.now
        if self.left and elapsed > 0:
            share = elapsed / len(self.left)
            for entry in self.left.values():
                entry[0] -= share

    def _serve(self):
        while True:
            if not self.left:
                yield self.joined
            else:
                first = min(self.left, key=lambda k: self.left[k][0])
                wake = self.env.timeout(max(self.left[first][0], 0.0) * len(self.left))
                yield wake | self.joined
                self._charge()
                if wake.processed:
                    finished = [k for k, (left, _, service) in self.left.items() if k == first or left <= 1e-12 * service]
                    for k in finished:
                        self.left.pop(k)[1].succeed()
            if self.joined.triggered:
                self.joined = self.env.event()


class _PrbCarrier(_SharedCarrier):
    """``_SharedCarrier`` split by PRBs (``prb.prb_landings`` is its closed form): while m uploads are in progress
    upload j advances at ``prb.equal_speed(share, m)[j]`` (one PRB a share M/m of the slots when m > M), and its
    airtime and PRB-seconds grow as min(1, M/m) and M/m per second."""

    def __init__(self, env: simpy.Environment, share: np.ndarray, participants: int, scheduler: str = "equal_prb") -> None:
        self.share = share
        self.scheduler = scheduler
        self.prbs = share.shape[1] - 1
        self.airtime = np.zeros(participants)
        self.prb_seconds = np.zeros(participants)
        super().__init__(env)

    def _speeds(self) -> dict[int, float]:
        keys = list(self.left)
        rows = [self.who[k] for k in keys]
        m = len(keys)
        speed = light_speed(self.share[rows], m, self.scheduler) if m <= self.prbs else self.share[rows, 1] * self.prbs / m
        return dict(zip(keys, speed.tolist()))

    def _holding(self) -> dict[int, float]:
        keys = list(self.left)
        m = len(keys)
        if m <= self.prbs and self.scheduler == "proportional_fair":
            return dict(zip(keys, pf_shares(self.share[[self.who[k] for k in keys]]).tolist()))
        return dict.fromkeys(keys, self.prbs / m)

    def _charge(self) -> None:
        elapsed, self.last = self.env.now - self.last, self.env.now
        if self.left and elapsed > 0:
            m = len(self.left)
            holding = self._holding()
            for key, speed in self._speeds().items():
                self.left[key][0] -= elapsed * speed
                self.airtime[self.who[key]] += elapsed * min(1.0, self.prbs / m)
                self.prb_seconds[self.who[key]] += elapsed * holding[key]

    def _serve(self):
        while True:
            if not self.left:
                yield self.joined
            else:
                speeds = self._speeds()
                first = min(self.left, key=lambda k: self.left[k][0] / speeds[k])
                wake = self.env.timeout(max(self.left[first][0], 0.0) / speeds[first])
                yield wake | self.joined
                self._charge()
                if wake.processed:
                    finished = [k for k, (left, _, service) in self.left.items() if k == first or left <= 1e-9 * service]
                    for k in finished:
                        self.left.pop(k)[1].succeed()
            if self.joined.triggered:
                self.joined = self.env.event()


def _shared(ready, inputs: RoundInputs, order: np.ndarray, m: int):
    """Landings on a shared carrier, in time share or split by PRBs, and (PRBs) each participant's airtime and
    PRB-seconds."""
    if inputs.ul_share is None:
        return shared_landings(ready, inputs.upload[order]), None, None
    landed, air, prb_s = prb_landings(ready, inputs.upload[order], inputs.ul_share[order], inputs.ul_scheduler)
    airtime, prb_seconds = np.zeros(m), np.zeros(m)
    airtime[order], prb_seconds[order] = air, prb_s
    return landed, airtime, prb_seconds


def _downlink_end(inputs: RoundInputs) -> float:
    """End of the last stream; summed left to right exactly as the event clock does."""
    end = 0.0
    for duration in inputs.stream_durations.tolist():
        end += duration
    return end


def _arrivals(inputs: RoundInputs) -> tuple[np.ndarray, np.ndarray]:
    """Per participant: the end of its last stream (0 if none) and that stream's send
    position (-1 if none), which is the order SimPy wakes clients in when times tie."""
    m = len(inputs.clients)
    t_received = np.zeros(m)
    last_stream = np.full(m, -1)
    if inputs.stream_members:
        sizes = [len(s) for s in inputs.stream_members]
        members = np.concatenate(inputs.stream_members)
        np.maximum.at(t_received, members, np.repeat(np.cumsum(inputs.stream_durations), sizes))
        np.maximum.at(last_stream, members, np.repeat(np.arange(len(sizes)), sizes))
    return t_received, last_stream


def phased_closed_form(
    inputs: RoundInputs, *, channels: int, deadline: float | None, uplink: str = "orthogonal"
) -> RoundTimes:
    """The phased schedule without an event loop: same arithmetic, same order, same floats.

    Phased rounds are closed-form given the draws: cumulative stream ends, compute
    from the downlink end, then FIFO list scheduling on ``channels`` slots from the
    barrier (the last remaining client's compute end). Tests check it equals
    ``simulate(..., schedule='phased')`` on the same inputs.
    """
    m = len(inputs.clients)
    dl_end = _downlink_end(inputs)
    t_received, _ = _arrivals(inputs)
    t_computed = dl_end + inputs.compute
    dropped = t_computed > deadline if deadline is not None else np.zeros(m, dtype=bool)
    t_uploaded = np.where(dropped, math.inf, t_computed)
    staying = ~dropped
    barrier = float(t_computed[staying].max()) if staying.any() else dl_end
    uploaders = np.flatnonzero(staying & (inputs.upload > 0))
    order = uploaders[np.argsort(t_computed[uploaders], kind="stable")]
    airtime = prb_seconds = None
    if uplink == "shared":
        t_uploaded[order], airtime, prb_seconds = _shared(barrier, inputs, order, m)
    else:
        t_uploaded[order] = fifo_landings(barrier, inputs.upload[order], channels)
    return RoundTimes(t_received=t_received, t_computed=t_computed, t_uploaded=t_uploaded, dl_end=dl_end,
                      airtime=airtime, prb_seconds=prb_seconds)


def pipelined_closed_form(
    inputs: RoundInputs, *, duplex: str, channels: int, deadline: float | None, uplink: str = "orthogonal"
) -> RoundTimes:
    """The pipelined schedule without an event loop, float for float.

    The downlink never waits for the uplink: under FDD they are separate, and
    under TDD the base station claims the medium for its next stream the moment
    the previous one ends, ahead of every queued upload. So each client's streams
    end at fixed times, and under TDD no upload starts before the last stream
    ends. What remains is a first-come-first-served queue on ``channels`` slots
    with release times, served in the order SimPy would: by compute end, then by
    the send position of the client's last stream, then by client index. Tests
    check it equals ``simulate(..., schedule='pipelined')`` on the same inputs.
    """
    m = len(inputs.clients)
    dl_end = _downlink_end(inputs)
    t_received, last_stream = _arrivals(inputs)
    t_computed = t_received + inputs.compute
    dropped = t_computed > deadline if deadline is not None else np.zeros(m, dtype=bool)
    t_uploaded = np.where(dropped, math.inf, t_computed)
    uploaders = np.flatnonzero(~dropped & (inputs.upload > 0))
    order = uploaders[np.lexsort((last_stream[uploaders], t_computed[uploaders]))]
    ready = t_computed[order] if duplex == "fdd" else np.maximum(t_computed[order], dl_end)
    airtime = prb_seconds = None
    if uplink == "shared":
        t_uploaded[order], airtime, prb_seconds = _shared(ready, inputs, order, m)
    else:
        t_uploaded[order] = fifo_landings(ready, inputs.upload[order], channels)
    return RoundTimes(t_received=t_received, t_computed=t_computed, t_uploaded=t_uploaded, dl_end=dl_end,
                      airtime=airtime, prb_seconds=prb_seconds)


def order_streams(streams: tuple, policy: str) -> list:
    """Send order: the plan's order, or largest receiver group first (ties keep plan order)."""
    if policy == "largest_first":
        return sorted(streams, key=lambda stream: -len(stream.receivers))
    return list(streams)


def shared_landings(ready: float | np.ndarray, service: np.ndarray) -> np.ndarray:
    """Landing times of uploads that share one carrier equally (egalitarian processor sharing).

    Upload j becomes ready at ``ready[j]`` (a number: all at once) and needs ``service[j]``
    seconds of the whole carrier; while m uploads are in progress each gets 1/m of it
    (a round-robin scheduler over slots much shorter than the uploads). Computed in
    virtual time V, dV/dt = 1/m: an upload that starts at V_a lands when V reaches
    V_a + service, so landings come out of a heap in O(n log n). An upload that can
    never finish (service ``inf``: in outage) is not scheduled and lands at ``inf``.
    """
    service = np.asarray(service, dtype=float)
    starts = np.broadcast_to(np.asarray(ready, dtype=float), service.shape)
    landings = np.full(service.shape, math.inf)
    start_at, needs = starts.tolist(), service.tolist()  # Python floats: numpy's arithmetic, cheaper to read
    order = [j for j in np.argsort(starts, kind="stable").tolist() if math.isfinite(needs[j])]
    heap: list[tuple[float, int]] = []
    now = virtual = 0.0
    position = 0
    while position < len(order) or heap:
        arrival = start_at[order[position]] if position < len(order) else math.inf
        if heap:
            departure = now + (heap[0][0] - virtual) * len(heap)
            if departure <= arrival:
                tag, j = heapq.heappop(heap)
                now, virtual = departure, tag
                landings[j] = departure
                continue
            virtual += (arrival - now) / len(heap)
        now = arrival
        j = order[position]
        heapq.heappush(heap, (virtual + needs[j], j))
        position += 1
    return landings


def fifo_landings(ready: float | np.ndarray, durations: np.ndarray, channels: int) -> np.ndarray:
    """Landing times of uploads served first come first served, in the given order, on
    ``channels`` slots; upload j starts once a slot is free and not before ``ready[j]``
    (a number: every upload is ready then). Same additions, in the same order, as SimPy."""
    if np.ndim(ready) == 0 and channels == 1:
        return np.cumsum(np.concatenate(([ready], durations)))[1:]
    starts = np.broadcast_to(np.asarray(ready, dtype=float), durations.shape).tolist()
    landings = []
    free = [0.0] * min(channels, len(durations))
    for start, duration in zip(starts, durations.tolist()):
        landing = (start if start > free[0] else free[0]) + duration
        heapq.heapreplace(free, landing)
        landings.append(landing)
    return np.array(landings, dtype=float)
