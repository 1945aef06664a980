"""What a run will cost on this machine, said (and refused when it cannot fit) before anything big is allocated.

``check_run(scenario)`` first refuses a scenario whose data alone would not
fit (``learning.data.guard.check_data``, torch-free: the loader's and the dealing's peak from the spec's sizes,
``learning/data/sizes.py``, before a sample is loaded or drawn), then builds the
first seed's data (sizes, input shape, classes), estimates the peak memory with
:func:`wirelessfl.learning.memory.estimate_memory`, compares it with the memory
available (``psutil.virtual_memory().available``, capped by a cgroup limit; on
CUDA ``torch.cuda.mem_get_info``) and raises ``ValueError`` with one line when
the estimate exceeds ``MEMORY_FRACTION`` of it: the rest is the safety margin
for what the estimate leaves out (allocator fragmentation, library workspaces,
other processes growing meanwhile). A run that fits gets an order-of-magnitude
time: timed ``LockstepEngine.train`` calls of this model (a few steps each), with the run's
optimizer, batch size and slot-group size, give this machine's training
throughput (and one ``evaluate`` call the floor of an evaluation's time), which
is multiplied by the run's work (seeds x trainings per seed
x rounds x training samples x local epochs x the algorithm's work factor, plus
the evaluation passes at a third of a training pass each). At hundreds of clients
and more, timed real rounds of the first unit (``run.probe``) add what a round
costs beyond that (network, gathering, aggregation, records) to every round, and a
timed real evaluation of a chunk of clients what a client costs an evaluation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from wirelessfl.algorithms.base import FORWARD_COST
from wirelessfl.config import Scenario
from wirelessfl.learning.data.federated import FederatedData, build_federated_data
from wirelessfl.learning.data import guard
from wirelessfl.learning.data.guard import MEMORY_FRACTION, format_bytes
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.schedule import batch_width
from wirelessfl.learning.workers import balanced_group, group_samples
from wirelessfl.learning.memory import MemoryEstimate, SplitSizes, estimate_memory, footprint
from wirelessfl.learning.plugins import from_environment
from wirelessfl.learning.models import Architecture, get_architecture
from wirelessfl.run.build import build_units, resolve_device
from wirelessfl.run.evaluation import evaluated
from wirelessfl.run.followers import following_curves
from wirelessfl.run.keys import unit_keys
from wirelessfl.run import probe
from wirelessfl.run.sampled_evaluation import CHUNK_CLIENTS, evaluate_sample

#: One-sample clients of the probe that times what a client costs an evaluation (runs of at least that many clients).
EVAL_CLIENT_PROBE = 256
#: Runs of at least ``EVAL_CLIENT_PROBE`` clients whose modeled round is shorter than this also time real rounds of
#: their first unit (``run.probe``): there a round's fixed costs outweigh its training, and timing them is cheap.
ROUND_PROBE_MAX_S = 2.0


@dataclass(frozen=True)
class RunCost:
    """The memory estimate, the memory available, and the training time expected here (NaN: not measured)."""

    memory: MemoryEstimate
    available: int
    device: str
    seconds: float
    probe_s: float = 0.0
    left: float = 1.0
    """The share of the run's unit-rounds still to train (below 1 when resuming; ``seconds`` is for them)."""
    notes: tuple[str, ...] = ()
    """Lines the preview prints after ``line()``: physical profiles whose round is mostly the default compute
    floor (``network.compute_floor``)."""
    client_store: str = "memory"
    """Where the run keeps per-client state: the scenario's ``client_store.where``, or ``disk`` when it sets none
    and the estimate fits only so (``learning/client_store.py``)."""

    def line(self) -> str:
        """``estimated memory for the run 1.2 GB (beyond the loaded libraries) of 21.0 GB available; training about 40 min on this machine``
        (``... for what is left (12% of the run's rounds)`` when resuming)."""
        where = "on this machine" if self.device == "cpu" else f"on this machine's {self.device}"
        memory = f"estimated memory for the run {format_bytes(self.memory.total)} (beyond the loaded libraries) of {format_bytes(self.available)} available"
        if self.client_store == "disk":
            memory += f", per-client state on disk up to {format_bytes(self.memory.disk)} (client_store)"
        if math.isnan(self.seconds):
            return f"{memory}; training time not measured"
        left = "" if self.left >= 1.0 else f" for what is left ({_share(self.left)} of the run's rounds)"
        return f"{memory}; training {format_duration(self.seconds)} {where}{left}"


def _share(fraction: float) -> str:
    """``12%``; ``under 1%`` for a sliver that is not nothing."""
    return "under 1%" if 0 < fraction < 0.01 else f"{100 * fraction:.0f}%"


def format_duration(seconds: float) -> str:
    """An order of magnitude in words: ``about 40 min``, ``about 3 h``, ``about 2.5e+04 years``."""
    if not math.isfinite(seconds):
        return "without end"
    if seconds < 1:
        return "under a second"
    for unit, size, limit in (("s", 1, 90), ("min", 60, 90), ("h", 3600, 48), ("days", 86400, 730)):
        if seconds < size * limit:
            return f"about {seconds / size:.0f} {unit}"
    years = seconds / (365.25 * 86400)
    return f"about {years:.0f} years" if years < 1e4 else f"about {years:.1e} years"


def available_memory(device: torch.device) -> int:
    """Bytes this run can still allocate: free GPU memory, or available RAM capped by a cgroup v2 limit."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return guard.available_ram()  # looked up on the module: tests fix the memory there


def _workers(device: torch.device) -> int:
    return torch.get_num_threads() if device.type == "cpu" else 1


def _split_sizes(data: FederatedData) -> SplitSizes:
    return SplitSizes(
        train=tuple(data.sizes("train").tolist()),
        val=tuple(data.sizes("val").tolist()),
        test=tuple(data.sizes("test").tolist()),
    )


def _curves(scenario: Scenario) -> list[tuple[str, dict]]:
    return [(a.name, params) for a in scenario.algorithms for _, _, params in a.expand()]


def _clients_trained(scenario: Scenario, participants: int) -> list[int]:
    """Per curve, the clients it trains over the run: ``participants`` a round, or under asynchronous aggregation
    ``participants`` in round 1 and then as many as each aggregation took (``buffer``)."""
    out = []
    for a in scenario.algorithms:
        aggregation = scenario.training_for(a.training).aggregation
        buffered = aggregation is not None and aggregation.mode == "async"
        count = participants + (scenario.rounds - 1) * aggregation.buffer if buffered else scenario.rounds * participants
        out += [count] * len(a.expand())
    return out


def _units_per_curve(scenario: Scenario) -> int:
    """Trainings of one curve a seed holds at once: one per profile when a deadline decides who arrives."""
    profiles = scenario.profiles()
    return len(profiles) if any(p.deadline is not None for p in profiles) else 1


def estimate_scenario(
    scenario: Scenario, data: FederatedData, device: torch.device, client_store: str = "memory"
) -> tuple[MemoryEstimate, Architecture]:
    """The memory estimate of ``scenario`` on ``data`` with per-client state in ``client_store`` (no model is allocated)."""
    arch = get_architecture(scenario.model.name, data.input_shape, data.num_classes, scenario.model.head, **scenario.model.options)
    t = scenario.training
    estimate = estimate_memory(
        arch,
        _split_sizes(data),
        t.train_config(),
        _curves(scenario),
        participation=t.participation,
        unseen_fraction=t.unseen_fraction,
        keep_optimizer_state=t.keep_optimizer_state,
        groups=data.num_groups,
        rounds=scenario.rounds,
        units_per_curve=_units_per_curve(scenario),
        profiles=len(scenario.networks),
        seeds=len(scenario.seeds),
        workers=_workers(device),
        max_samples=group_samples(device),
        eval_clients=None if scenario.evaluation.clients == "all" else CHUNK_CLIENTS,
        eval_sample=None if scenario.evaluation.clients == "all" else int(scenario.evaluation.clients),
        evaluated_rounds=sum(evaluated(r, scenario.rounds, scenario.eval_every, scenario.eval_last) for r in range(1, scenario.rounds + 1)),
        client_store_on_disk=client_store == "disk",
        input_bytes=data.clients[0].x_train.element_size() if data.clients else 4,
        held_samples=data.held_samples,
    )
    return estimate, arch


def choose_store(scenario: Scenario, data: FederatedData, device: torch.device, free: int) -> tuple[MemoryEstimate, Architecture, str]:
    """The estimate and where per-client state goes: the scenario's ``client_store``, else RAM unless the estimate
    exceeds the budget and is smaller with the state on disk (then disk, as the preview or the refusal says)."""
    if scenario.client_store is not None:
        where = scenario.client_store.where
        return (*estimate_scenario(scenario, data, device, where), where)
    estimate, arch = estimate_scenario(scenario, data, device)
    if estimate.total > MEMORY_FRACTION * free:
        on_disk, _ = estimate_scenario(scenario, data, device, "disk")
        if on_disk.total < estimate.total:  # it fits, or it is refused with the state already on disk
            return on_disk, arch, "disk"
    return estimate, arch, "memory"


def refusal(estimate: MemoryEstimate, available: int, client_store: str = "memory") -> str:
    """The one line that refuses a run that does not fit; fewer rounds are advised when the round records weigh.
    Per-client state on disk is said beside the RAM (it is not counted in it)."""
    advice = ["fewer clients (data.clients)", "a smaller training.batch_size", "a smaller model (model)", "fewer algorithms per run"]
    if estimate.parts.get("round records", 0) >= 0.05 * estimate.total:
        advice.insert(0, "fewer rounds (rounds)")
    disk = f", with per-client state on disk (up to {format_bytes(estimate.disk)}, client_store)" if client_store == "disk" else ""
    return (
        f"memory: this run needs about {format_bytes(estimate.total)} at its peak ({estimate.describe(min_share=0.05)}){disk} "
        f"but {format_bytes(available)} is available and a run may use {MEMORY_FRACTION:.0%} of it; "
        f"use {', '.join(advice[:-1])} or {advice[-1]}"
    )


@dataclass(frozen=True)
class Throughput:
    """This machine's training speed for one model, the least time an evaluation call takes, and what evaluating
    one more client costs beside its samples (gathering its model row, its weight copies, its split's slices)."""

    samples_per_s: float
    eval_call_s: float
    eval_client_s: float = 0.0


def measure_throughput(
    arch: Architecture, cfg: TrainConfig, device: torch.device, slots: int, budget_s: float = 0.25, steps: int = 4,
    eval_clients: int = 0,
) -> tuple[Throughput, float]:
    """(:class:`Throughput`, seconds spent): timed ``engine.train`` calls of ``slots`` slots, one ``evaluate``.

    Calls of ``steps`` steps per slot (random inputs): the first warms the
    kernels up untimed, then calls are timed until ``budget_s`` is spent (at
    least one) and the fastest counts. The untimed warm-up and several steps a
    call matter: the earlier probe (one timed one-step call, warm-up included)
    read 3-6x slower than a paper run trains and announced 4 h for a 40-min run.
    The evaluation call's time is the floor of every evaluation of the run
    (call overhead). With ``eval_clients``, one more (warmed-up) call evaluates
    that many one-sample clients: its time per client is what a client costs an
    evaluation beside its samples. At 10,000 clients of a few samples that cost,
    not the forward passes, is the evaluation, and leaving it out made the
    preview say 39 s for a 10,000-client round that took 190 s.
    """
    began = time.perf_counter()
    generator = torch.Generator().manual_seed(0)
    cfg = replace(cfg, epochs=1)
    batch = cfg.batch_size
    engine = LockstepEngine(arch, device, accelerators=from_environment())
    params = arch.init_flat(slots, generator).to(device)
    x = torch.randn((slots, steps * batch, *arch.input_shape), generator=generator).to(device)
    y = torch.randint(0, arch.num_classes, (slots, steps * batch), generator=generator).to(device)
    datasets = [(x[s], y[s]) for s in range(slots)]

    def timed(data: list) -> float:
        start = time.perf_counter()
        engine.train(params, data, cfg, generator)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    timed(datasets)
    best = timed(datasets)
    while time.perf_counter() - began < budget_s:
        best = min(best, timed(datasets))
    start = time.perf_counter()
    engine.evaluate(params, [(xs[:batch], ys[:batch]) for xs, ys in datasets])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    eval_call = time.perf_counter() - start
    per_client = 0.0
    if eval_clients > 0:
        rows = arch.init_flat(1, generator).to(device).expand(eval_clients, -1)
        tiny = [(x[s % slots, :1], y[s % slots, :1]) for s in range(eval_clients)]
        engine.evaluate(rows[:slots], tiny[:slots])  # warm the shapes up
        start = time.perf_counter()
        engine.evaluate(rows, tiny)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        per_client = (time.perf_counter() - start) / eval_clients
    return Throughput(slots * steps * batch / best, eval_call, per_client), time.perf_counter() - began


def units_left(scenario: Scenario, done: Mapping[str, int] | None = None) -> list[float]:
    """Per curve, its units still to train, counted in units: each unit adds the share of its rounds not
    yet done (``done``: rounds per unit key, as :func:`wirelessfl.run.folder.check_checkpoints` reads them)."""
    done = done or {}
    return [
        sum(1.0 - min(done.get(key, 0), scenario.rounds) / scenario.rounds for _, key in units)
        for units in unit_keys(scenario)
    ]


def estimate_seconds(
    scenario: Scenario, data: FederatedData, arch: Architecture, speed: Throughput, done: Mapping[str, int] | None = None,
    round_overhead_s: float = 0.0,
) -> float:
    """Training wall seconds of the whole run at ``speed``, or of what is left of it after ``done``
    (rounds per unit key; see :func:`units_left`).

    Per training of a curve: ``rounds`` x participants x training samples x
    local epochs x the algorithm's work factor, at ``speed.samples_per_s``; plus
    every evaluation round's two passes (test and val splits, and the train split with ``eval_train``; times the
    algorithm's slot copies, a third of a training pass a sample, and ``speed.eval_client_s`` for each client
    evaluated: all of them, or ``evaluation.clients`` of them at every round but the last), each at
    least one measured evaluation call, and the training an algorithm does for
    every client at each evaluation (FedAvg+'s fine-tuning epochs); plus ``round_overhead_s`` a trained round
    (:func:`probe_rounds`: what a real round took beyond that model: network, gathering, aggregation, records). Trainings: the
    units of each curve (a seed, or a seed and profile when the profiles change what it trains), less the curves
    that follow another's training (``Algorithm.trains_as``: FedAvg+ beside FedAvg).
    """
    evaluations = 1 + sum(evaluated(r, scenario.rounds, scenario.eval_every, scenario.eval_last) for r in range(1, scenario.rounds + 1))
    total = 0.0
    followers = following_curves(scenario)  # _curves, curves_of and unit_keys list the curves in the same order
    left = units_left(scenario, done)
    for i, (train, evaluation, sampled, pool) in enumerate(_curve_costs(scenario, data, arch, speed)):
        trained = 0.0 if i in followers else train + scenario.rounds * round_overhead_s
        total += left[i] * (trained + (evaluations - 1) * evaluation(sampled) + evaluation(pool))
    return total


def modeled_round(scenario: Scenario, data: FederatedData, arch: Architecture, speed: Throughput) -> float:
    """What :func:`estimate_seconds` charges the first curve's trained round that evaluates a sample (or every
    client): the round a probe times (:func:`wirelessfl.run.probe.round_seconds`)."""
    train, evaluation, sampled, _ = _curve_costs(scenario, data, arch, speed)[0]
    return train / scenario.rounds + evaluation(sampled)


def _curve_costs(scenario: Scenario, data: FederatedData, arch: Architecture, speed: Throughput) -> list[tuple]:
    """Per curve: (a training's seconds over the run, seconds of an evaluation of ``clients``, the clients a
    sampled evaluation takes, the training pool)."""
    t = scenario.training
    sizes = _split_sizes(data)
    m = sizes.clients
    held_out = min(m - 1, math.floor(t.unseen_fraction * m + 0.5)) if t.unseen_fraction > 0 else 0
    pool = m - held_out
    participants = pool if t.participation >= 1.0 else max(1, math.floor(t.participation * pool + 0.5))
    per_client = sum(sizes.train) / m
    sampled = evaluated_clients(scenario, pool)
    cfg = t.train_config()
    rate = speed.samples_per_s
    trained = _clients_trained(scenario, participants)
    splits = (sizes.val, sizes.test, sizes.train) if scenario.eval_train else (sizes.val, sizes.test)
    out = []
    for i, (name, params) in enumerate(_curves(scenario)):
        fp = footprint(name, params, arch, sizes, participants, cfg, data.num_groups)
        tuning = sum(sizes.train) * fp.eval_work / rate  # every client's training at each evaluation (FedAvg+)

        def evaluation(clients: int, fp=fp, tuning=tuning) -> float:
            share = clients / pool  # the sample's share of the evaluated samples
            passes = [fp.eval_copies * (share * sum(split) * FORWARD_COST / rate + clients * speed.eval_client_s) for split in splits]
            return tuning + sum(max(speed.eval_call_s, p) for p in passes)

        out.append((trained[i] * per_client * t.local_epochs * fp.work / rate, evaluation, sampled, pool))
    return out


def evaluated_clients(scenario: Scenario, pool: int) -> int:
    """Training clients evaluated at every evaluated round but the last (which evaluates all ``pool``)."""
    clients = scenario.evaluation.clients
    return pool if clients == "all" else min(int(clients), pool)


def check_run(
    scenario: Scenario,
    data: FederatedData | None = None,
    device: str | None = None,
    available: int | None = None,
    probe: bool = True,
    done: Mapping[str, int] | None = None,
) -> RunCost:
    """Estimate the run's memory and time here; ``ValueError`` (one line) when it cannot fit.

    ``data`` is the first seed's data when the caller has it (else it is built);
    ``available`` overrides the measured free memory (tests); ``probe=False``
    skips the timed step (the time is then not measured) and the preview's ``notes``; ``done`` (rounds per
    unit key, when resuming) leaves the rounds already trained out of the time.
    """
    dev = resolve_device(device or scenario.device)
    if data is None:
        guard.check_data(scenario, available)
        data = build_federated_data(scenario.data_spec(), scenario.seeds[0])
    free = available_memory(dev) if available is None else int(available)
    estimate, arch, where = choose_store(scenario, data, dev, free)
    if estimate.total > MEMORY_FRACTION * free:
        raise ValueError(refusal(estimate, free, where))
    seconds, spent = math.nan, 0.0
    if probe:
        cfg = scenario.training.train_config()
        cfg = replace(cfg, batch_size=batch_width(cfg.batch_size, _split_sizes(data).train))  # the batch the engine runs
        participants = max(1, min(data.num_clients, math.ceil(scenario.training.participation * data.num_clients)))
        workers = _workers(dev)
        group = balanced_group(participants, max(1, group_samples(dev) // cfg.batch_size), workers)
        slots = max(1, min(participants, group * workers))
        # below a few hundred clients an evaluation is its samples and its call (a client probe would cost more than it tells)
        probed = EVAL_CLIENT_PROBE if data.num_clients >= EVAL_CLIENT_PROBE else 0
        speed, spent = measure_throughput(arch, cfg, dev, slots, eval_clients=probed)
        began = time.perf_counter()
        speed, overhead = probe_rounds(scenario, data, arch, speed, dev, where) if probed else (speed, 0.0)
        spent += time.perf_counter() - began
        seconds = estimate_seconds(scenario, data, arch, speed, done, overhead)
    left = units_left(scenario, done)
    share = sum(left) / max(1, sum(len(units) for units in unit_keys(scenario)))
    notes = compute_floor_notes(scenario, data.num_clients, arch.param_count) if probe else ()  # the preview's; a sweep's per-unit check skips them
    return RunCost(
        memory=estimate, available=free, device=dev.type, seconds=seconds, probe_s=spent, left=share, notes=notes, client_store=where
    )


def probe_rounds(
    scenario: Scenario, data: FederatedData, arch: Architecture, speed: Throughput, device: torch.device, client_store: str = "memory"
) -> tuple[Throughput, float]:
    """``speed`` with what a client costs the run's own evaluation, and the seconds a round after the first
    takes beyond what :func:`modeled_round` then charges it, both timed for real on the first unit of the run
    (``speed`` and 0 when the modeled round is long, or the run too short to time a round that is not its
    last). The set-up and warm-up of the probe's first round are not charged: the run after the preview, in
    the same process, finds them done.

    At 1,000 EMNIST clients, 100 a round, the throughput model alone said 0.19x of the run: a round's network,
    gathering, aggregation and records cost more than its training. At 10,000 it said 0.4x:
    a client costs the real evaluation (its model row, its slices, its metrics) several times what the
    engine's one-sample probe does, and the last round evaluates every client."""
    if modeled_round(scenario, data, arch, speed) >= ROUND_PROBE_MAX_S or scenario.rounds <= probe.PROBE_ROUNDS:
        return speed, 0.0
    with probe.kept_random_states():
        unit = build_units(scenario, scenario.seeds[0], device, data=data, first=True, client_store=client_store)[0]
        per_round = probe.round_seconds(unit, eval_every=1, test_split=True)
        _, _, sampled, pool = _curve_costs(scenario, data, arch, speed)[0]
        if sampled < pool:  # the last round evaluates every client: time the real evaluation of a chunk of them
            count = min(pool, CHUNK_CLIENTS)
            began = time.perf_counter()
            evaluate_sample(unit.algorithm, probe.PROBE_ROUNDS + 1, count, True, scenario.eval_train)
            speed = _per_client(scenario, data, arch, speed, count, time.perf_counter() - began)
    return speed, max(0.0, per_round - modeled_round(scenario, data, arch, speed))


def _per_client(scenario: Scenario, data: FederatedData, arch: Architecture, speed: Throughput, count: int, seconds: float) -> Throughput:
    """``speed`` with the per-client evaluation cost at which an evaluation of ``count`` clients is charged
    ``seconds`` (the model is affine in it), never below the probe's."""
    def charged(per_client: float) -> float:
        return _curve_costs(scenario, data, arch, replace(speed, eval_client_s=per_client))[0][1](count)

    step = 1e-3
    slope = (charged(step) - charged(0.0)) / step
    return replace(speed, eval_client_s=max(speed.eval_client_s, (seconds - charged(0.0)) / slope if slope > 0 else 0.0))


def compute_floor_notes(scenario: Scenario, num_clients: int, model_params: int) -> tuple[str, ...]:
    """One line per physical profile of ``scenario`` that leaves ``t_min`` at its default while that floor is
    most of a FedAvg round (``network.compute_floor.compute_floor_note``)."""
    from wirelessfl.network.compute_floor import compute_floor_note
    from wirelessfl.network.energy import split_entry

    lines = (
        compute_floor_note(index, split_entry(raw)[0], profile, num_clients, model_params)
        for index, (raw, profile) in enumerate(zip(scenario.networks, scenario.profiles()))
    )
    return tuple(line for line in lines if line is not None)


__all__ = ["MEMORY_FRACTION", "RunCost", "Throughput", "available_memory", "check_run", "compute_floor_notes", "estimate_seconds", "format_duration", "measure_throughput", "modeled_round", "probe_rounds", "refusal"]
