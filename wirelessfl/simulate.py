"""The co-simulation loop: the one place where network and learning meet.

For each round::

    plan   = algorithm.plan(round)                 # CommPlan: who gets what
    timing = network.time_round(plan, rng)         # RoundTiming: when, who made it
    info   = algorithm.step(round, timing.arrived) # lockstep training + aggregation
    record metrics at the simulated time

When no profile can change who arrives (no deadline, full participation is not
required: sampled participants are drawn from the seed, not from the network),
training does not depend on the network, so each (algorithm variant, seed)
trains ONCE and its plans are replayed through every profile. Otherwise each
profile trains its own copy. Both paths give the same trace where both apply
(tested).

A *unit* (seed, curve, and profile when training per profile) is the grain of
resumption: it checkpoints its algorithm state and rows every
``checkpoint_every`` rounds, atomically, and a finished unit writes its rows
once. All randomness derives from (seed, round, purpose), so a resumed unit
continues with exactly the draws an uninterrupted run would have made.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from wirelessfl.accounting import CLIENT_ENERGY_COLUMNS, CLIENT_ROUNDS_LIMIT, Ledger, account, client_round_rows
from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.algorithms.base import derive_seed, display_name, draw_held_out, is_registered, shared_trainings, user_errors
from wirelessfl.config import (
    FINGERPRINT_IGNORES, Scenario, ScenarioError, algorithm_path, first_line, resolved, scenario_fingerprint,
)
from wirelessfl.learning.data.federated import FederatedData, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine
from wirelessfl.learning.plugins import from_environment
from wirelessfl.learning.models import get_architecture
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.network.physical import link_model as physical_link_model
from wirelessfl.checkpoint import (
    SEAM_TYPES,
    SUFFIX,
    CheckpointError,
    FingerprintMismatch,
    ProvenanceMismatch,
    dumps,
    fingerprint_of,
    load_checkpoint,
    save_checkpoint,
)
from wirelessfl.results.io import FIT_COLUMNS, SEEDING, atomic_write_text, resumable_writes
from wirelessfl.seam import CommPlan, RoundTiming

ProgressFn = Callable[[dict[str, Any]], None]


def resolve_device(requested: str) -> torch.device:
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda was requested but torch sees no CUDA device; use auto or cpu")
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


@dataclass(frozen=True)
class Curve:
    """One line in the figures: an algorithm with one point of its variant grid."""

    algorithm: str
    variant: str
    curve: str
    params: dict[str, Any]
    #: the algorithm's own training fields over the scenario's ``training:`` (``algorithms[i].training``)
    training: dict[str, Any] = field(default_factory=dict)
    #: its ``scheduling`` policy reads each round's uplink channel (docs/levers.md): it trains per profile
    schedules_by_channel: bool = False
    #: its ``aggregation`` is over the air (docs/levers.md): the channel decides who is aggregated, it trains per profile
    over_the_air: bool = False


def curves_of(scenario: Scenario) -> list[Curve]:
    def by_channel(training: dict[str, Any] | None) -> bool:
        scheduling = scenario.training_for(training).scheduling
        return scheduling is not None and scheduling.spec().reads_channel

    def analog(training: dict[str, Any] | None) -> bool:
        aggregation = scenario.training_for(training).aggregation
        return aggregation is not None and aggregation.mode == "over_the_air"

    return [
        Curve(a.name, v, c, p, dict(a.training or {}), by_channel(a.training), analog(a.training))
        for a in scenario.algorithms for v, c, p in a.expand()
    ]


def profiles_can_change_training(profiles: list[SystemProfile], curve: Curve | None = None, budgets: bool = False) -> bool:
    """A deadline or a battery budget (``budgets``) lets the network decide who is aggregated; and ``curve``,
    when its algorithm reads the channel (``uses_channel``, e.g. channel-aware ucfl streams), trains
    differently under each physical cell, and so does one whose scheduling policy reads the uplink channel."""
    if budgets or any(p.deadline is not None for p in profiles):
        return True
    return (
        curve is not None
        and (get_algorithm(curve.algorithm).uses_channel(curve.params) or curve.schedules_by_channel or curve.over_the_air)
        and any(p.physical is not None for p in profiles)
    )


@dataclass
class RoundRecord:
    """What the learning side produced in one round (independent of time)."""

    round: int
    plan: CommPlan | None
    metrics: dict[str, float]
    streams: int
    aggregated: int
    participants: int
    client_acc: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    diagnostics: dict[str, Any] = field(default_factory=dict)


def evaluate_round(algorithm, round: int, test_split: bool = True, fit: bool = False) -> tuple[dict[str, float], np.ndarray]:
    """Accuracy columns over the training clients; held-out clients only in ``unseen_acc``.

    Without ``test_split`` (tuning) the test split is never evaluated: only ``avg_val_acc`` is a
    number, every test column is NaN. With ``fit`` (``eval_train``) each client's model is also
    evaluated on its own training split, the same way for every method: ``fit_acc`` and ``fit_loss``
    (means over the training clients) tell a method that under-fits from one that over-fits, which the
    algorithms' own ``train_loss`` (each method's own running measure) cannot.
    """
    val = algorithm.evaluate("val")
    held_out = algorithm.held_out_clients()
    val_acc = val.accuracy.double().cpu().numpy()
    seen = np.setdiff1d(np.arange(len(val_acc)), held_out)
    if not test_split:
        metrics = dict.fromkeys(("avg_acc", "worst_acc", "p10_acc", "mean_loss", "unseen_acc"), math.nan)
        metrics["avg_val_acc"] = float(val_acc[seen].mean())
        return metrics, np.full(len(val_acc), math.nan)
    test = algorithm.evaluate("test")
    acc = test.accuracy.detach().double().cpu().numpy()
    metrics = {
        "avg_acc": float(acc[seen].mean()),
        "worst_acc": float(acc[seen].min()),
        "p10_acc": float(np.percentile(acc[seen], 10)),
        "avg_val_acc": float(val_acc[seen].mean()),
        "mean_loss": float(test.loss.double().cpu().numpy()[seen].mean()),
        "unseen_acc": float(acc[held_out].mean()) if len(held_out) else math.nan,
    }
    if fit:
        train = algorithm.evaluate("train")
        metrics["fit_acc"] = float(train.accuracy.double().cpu().numpy()[seen].mean())
        metrics["fit_loss"] = float(train.loss.double().cpu().numpy()[seen].mean())
    return metrics, acc


class Unit:
    """Training of one curve for one seed (and one profile when timing matters)."""

    def __init__(
        self,
        scenario: Scenario,
        curve: Curve,
        seed: int,
        data: FederatedData,
        engine: LockstepEngine,
        profile: SystemProfile | None,
    ) -> None:
        self.scenario = scenario
        self.curve = curve
        self.seed = seed
        self.profile = profile
        t = scenario.training_for(curve.training)
        self.network = NetworkModel(profile, data.num_clients, static_rng(seed, profile)) if profile is not None else None
        energy = scenario.energy_profiles()[profile.name] if profile is not None else None
        self.ledger = (
            Ledger(energy, data.num_clients, data.train_sizes, t.local_epochs)
            if energy is not None and energy.has_budget else None
        )
        channel_aware = self.network is not None and get_algorithm(curve.algorithm).uses_channel(curve.params)
        ctx = Context(
            data=data,
            arch=engine.arch,
            engine=engine,
            train=t.train_config(),
            keep_optimizer_state=t.keep_optimizer_state,
            held_out=draw_held_out(data.num_clients, t.unseen_fraction, seed),
            seed=learning_seed(seed),
            participation=t.participation,
            downlink_rates=self.network.nominal_downlink_rates() if channel_aware else None,
            scheduling=t.scheduling.spec() if t.scheduling is not None else None,
            compression=t.compression.spec() if t.compression is not None else None,
            uplink_channel=self.round_uplink_channel if self.network is not None and curve.schedules_by_channel else None,
            over_the_air=t.aggregation.spec() if t.aggregation is not None else None,
            analog=self.round_analog if self.network is not None and curve.over_the_air else None,
            server_optimizer=t.server_optimizer.spec() if t.server_optimizer is not None else None,
        )
        kind = get_algorithm(curve.algorithm)
        with user_errors(kind, "__init__"):
            self.algorithm = kind(ctx, **curve.params)
        self.base_train, self.schedule = ctx.train, t.lr_schedule
        self.data = data
        self.records: list[RoundRecord] = []
        self.timings: list[RoundTiming] = []
        shown = profile or scenario.profiles()[0]
        self.clock_profile = shown
        self.clock_network = self.network or NetworkModel(shown, data.num_clients, static_rng(seed, shown))
        self.clock_timings: list[RoundTiming] = []
        self.clock = 0.0
        self.wall_s = 0.0
        self.phases: dict[str, float] = {}
        #: the key of the unit whose training this one followed (``Unit.run`` followers), else None
        self.follows: str | None = None

    @property
    def key(self) -> str:
        return unit_key(self.seed, self.curve, self.profile)

    def round_uplink_channel(self, round: int):
        """The uplink channel state of ``round`` from the round's own draws (a fresh copy of its generator)."""
        return self.network.uplink_channel(network_rng(self.seed, self.profile.name, round))

    def round_analog(self, round: int, scheduled: np.ndarray):
        """Over-the-air aggregation of ``round``'s ``scheduled`` clients from the round's own draws (a fresh copy of
        its generator): who passed the truncation, the receiver's noise, the airtime."""
        spec = self.algorithm.ctx.over_the_air
        return self.network.analog_aggregation(
            network_rng(self.seed, self.profile.name, round), scheduled, spec.truncation_db, spec.receiver_noise,
            self.algorithm.ctx.arch.param_count,
        )

    @property
    def fingerprint(self) -> str:
        """What this unit's checkpoints are stamped with (:func:`unit_fingerprint`)."""
        return unit_fingerprint(self.scenario, self.curve, self.seed)

    def run(
        self,
        rounds: int,
        eval_every: int,
        on_round: ProgressFn | None = None,
        checkpoint=None,
        test_split: bool = True,
        eval_last: int = 0,
        followers: list[Unit] | None = None,
    ) -> None:
        """Train rounds up to ``rounds``, evaluating the rounds :func:`evaluated` names, adding the wall time of
        each phase to ``phases`` (see :meth:`runtime`).

        ``followers`` (units at this unit's round whose algorithm ``trains_as`` this one's) do not train: after
        each round they take this unit's state and evaluate their own way, and they share its plans and timings.
        Their evaluation time is theirs, not this unit's."""
        engine = self.algorithm.ctx.engine
        followers = followers or []
        mark = (engine.phase_times(), time.perf_counter())
        theirs: dict[str, float] = {}
        try:
            if not self.records:
                with engine.phase("evaluation"), user_errors(type(self.algorithm), "evaluate (round 0)"):
                    metrics, acc = evaluate_round(self.algorithm, 0, test_split, self.scenario.eval_train)
                self.records.append(RoundRecord(0, None, metrics, 0, 0, 0, acc))
                for follower in followers:
                    follower._follow(self, 0, True, test_split, theirs)
            start = self.records[-1].round + 1
            for r in range(start, rounds + 1):
                began = time.perf_counter()
                if self.ledger is not None:
                    self.algorithm.ctx.out_of_energy = self.ledger.battery.depleted
                self.at_round(r)
                with user_errors(type(self.algorithm), f"plan(round {r})"):
                    plan = self.algorithm.plan(r)
                with engine.phase("network"):
                    if self.algorithm.ctx.analog is not None:  # one analog upload (over the air); clock_network is network
                        timing = self.network.time_analog_round(
                            plan, network_rng(self.seed, self.clock_profile.name, r), self.round_analog(r, np.array(sorted(plan.participants), dtype=np.int64))
                        )
                    else:
                        timing = self.clock_network.time_round(plan, network_rng(self.seed, self.clock_profile.name, r))
                self.clock += timing.t_end
                self.clock_timings.append(timing)
                if self.network is not None:
                    arrived = timing.arrived
                    if self.ledger is not None:
                        arrived = self.ledger.charge(r, plan, timing)[1]
                    self.timings.append(timing)
                else:
                    arrived = plan.participants
                with user_errors(type(self.algorithm), f"step(round {r})"):
                    info = self.algorithm.step(r, frozenset(arrived))
                if evaluated(r, rounds, eval_every, eval_last):
                    with engine.phase("evaluation"), user_errors(type(self.algorithm), f"evaluate (round {r})"):
                        metrics, acc = evaluate_round(self.algorithm, r, test_split, self.scenario.eval_train)
                else:
                    metrics, acc = {k: math.nan for k in self.records[-1].metrics}, self.records[-1].client_acc
                metrics["train_loss"] = info.train_loss
                streams = len(plan.streams)
                self.records.append(
                    RoundRecord(r, plan, metrics, streams, info.aggregated, len(plan.participants), acc, dict(info.extra))
                )
                self.wall_s += time.perf_counter() - began
                for follower in followers:
                    follower._follow(self, r, evaluated(r, rounds, eval_every, eval_last), test_split, theirs)
                if on_round is not None:
                    on_round(
                        {"unit": self.key, "round": r, "avg_acc": metrics["avg_acc"], "avg_val_acc": metrics["avg_val_acc"],
                         "seed": self.seed, "time": self.clock,
                         "time_unit": timing.time_unit, "profile": self.clock_profile.name}
                    )
                if checkpoint is not None and (r % self.scenario.checkpoint_every == 0) and r < rounds:
                    mark = self._charge_phases(mark, theirs)  # a resumed unit keeps the time before its kill
                    with engine.phase("checkpointing"):
                        checkpoint(self)
                        for follower in followers:
                            checkpoint(follower)
        finally:
            self._charge_phases(mark, theirs)

    def _charge_phases(self, mark: tuple[dict[str, float], float], theirs: dict[str, float]) -> tuple[dict[str, float], float]:
        """Add to ``phases`` the wall time since ``mark`` (the engine's phase times and a clock reading), less
        what followers spent (``theirs``, emptied), and return a new mark. The engine is shared by a seed's
        units: only what this unit added counts."""
        engine = self.algorithm.ctx.engine
        before, began = mark
        now, times = time.perf_counter(), engine.phase_times()
        phases = dict(self.phases)
        phases["other"] = phases.get("other", 0.0) + now - began - theirs.pop("wall", 0.0)
        for label, seconds in times.items():
            added = seconds - before.get(label, 0.0) - theirs.get(label, 0.0)
            if added:
                phases[label] = phases.get(label, 0.0) + added
                phases["other"] -= added
        self.phases = phases
        theirs.clear()
        return times, now

    def at_round(self, round: int) -> None:
        """Give the algorithm the client rate of ``round`` under ``training.lr_schedule`` (round 0: the base rate)."""
        if self.schedule is not None:
            self.algorithm.ctx.train = replace(self.base_train, lr=self.base_train.lr * self.schedule.factor(max(round, 1)))

    def _follow(self, trainer: Unit, round: int, evaluate: bool, test_split: bool, theirs: dict[str, float]) -> None:
        """Record ``round`` of ``trainer`` as this unit's own (see :meth:`run`'s ``followers``); the wall and
        engine-phase time spent here are added to ``phases`` and to ``theirs`` (what the trainer must not count)."""
        engine = self.algorithm.ctx.engine
        before, began = engine.phase_times(), time.perf_counter()
        self.follows = trainer.key
        self.at_round(round)
        self.algorithm.follow(trainer.algorithm, round)
        if round == 0:
            with engine.phase("evaluation"):
                metrics, acc = evaluate_round(self.algorithm, 0, test_split, self.scenario.eval_train)
            self.records.append(RoundRecord(0, None, metrics, 0, 0, 0, acc))
        else:
            source = trainer.records[-1]
            if evaluate:
                with engine.phase("evaluation"):
                    metrics, acc = evaluate_round(self.algorithm, round, test_split, self.scenario.eval_train)
            else:
                metrics, acc = {k: math.nan for k in self.records[-1].metrics}, self.records[-1].client_acc
            metrics["train_loss"] = source.metrics["train_loss"]
            self.records.append(replace(source, metrics=metrics, client_acc=acc, diagnostics=dict(source.diagnostics)))
            self.clock = trainer.clock
            self.clock_timings.append(trainer.clock_timings[-1])
            if self.network is not None:
                self.timings.append(trainer.timings[-1])
        spent = time.perf_counter() - began
        if round > 0:  # as run(): wall_s counts trained rounds, phases round 0's evaluation too
            self.wall_s += spent
        self.phases["other"] = self.phases.get("other", 0.0) + spent
        theirs["wall"] = theirs.get("wall", 0.0) + spent
        for label, seconds in engine.phase_times().items():
            added = seconds - before.get(label, 0.0)
            if added:
                self.phases[label] = self.phases.get(label, 0.0) + added
                self.phases["other"] -= added
                theirs[label] = theirs.get(label, 0.0) + added

    def state(self, models: bool = True) -> dict[str, Any]:
        """What a checkpoint holds; without ``models`` only what rows, diagnostics and runtime need."""
        state = {
            "records": self.records,
            "timings": self.timings,
            "clock": self.clock,
            "wall_s": self.wall_s,
            "phases": dict(self.phases),
            "follows": self.follows,
        }
        if models:
            with user_errors(type(self.algorithm), "state_dict()"):
                state["algorithm"] = self.algorithm.state_dict()
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from ``state``; a finished unit's lean state leaves the algorithm untouched (it is not run again)."""
        if "algorithm" in state:
            with user_errors(type(self.algorithm), "load_state_dict()"):
                self.algorithm.load_state_dict(state["algorithm"])
        self.records = state["records"]
        self.timings = state["timings"]
        if self.ledger is not None:  # the batteries as they were after the last recorded round
            for rec, timing in zip(self.records[1:], self.timings):
                self.ledger.charge(rec.round, rec.plan, timing)
        self.clock = state["clock"]
        self.wall_s = state.get("wall_s", math.nan)
        self.phases = dict(state.get("phases", {}))
        self.follows = state.get("follows")

    def runtime(self) -> dict[str, Any]:
        """Wall seconds of training (summed over resumptions), nominal local-training samples per second, and phases.

        ``phases`` splits the wall time of :meth:`run` by label: "local training"
        and the other engine entry points by name ("full_gradient", "logits", ...)
        unless an algorithm labelled them, "evaluation", "network",
        "checkpointing", and "other" (aggregation and bookkeeping outside any
        label). Unlike ``wall_s`` it includes round 0's evaluation and the checkpoints.
        """
        rounds = self.records[-1].round
        per_round = float(self.data.train_sizes.sum()) * self.scenario.training_for(self.curve.training).local_epochs
        if self.follows is not None:  # its unit trained nothing: the trainer's runtime counts that training
            per_round = 0.0
        runtime = {
            "wall_s": self.wall_s,
            "rounds": rounds,
            "train_samples_per_round": per_round,
            "samples_per_s": rounds * per_round / self.wall_s if self.wall_s > 0 else math.nan,
            "phases": dict(sorted(self.phases.items(), key=lambda item: -item[1])),
        }
        if self.follows is not None:
            runtime["follows"] = self.follows
        return runtime


def evaluated(round: int, rounds: int, eval_every: int, eval_last: int = 0) -> bool:
    """Whether ``round`` (1..rounds) is evaluated: every ``eval_every``-th, each of the last ``eval_last``, and the last."""
    return round % eval_every == 0 or round > rounds - eval_last or round == rounds


def learning_seed(seed: int) -> int:
    """The seed every curve's algorithm is built from: the same for every curve of a scenario seed.

    Common random numbers: FedAvg, FedEM, IFCA, FedPer... of one seed start from the
    same initial model (``(learning_seed, "init")``), draw the same participants
    (``(learning_seed, round, "participation")``) and the same batch order
    (``(learning_seed, round, "train")``), so the difference between two curves is
    the methods' difference and not initialisation noise (a one-component FedEM
    reproduces FedAvg's trace).
    """
    return derive_seed(seed, "learning")


PROVENANCE = {"seeding": SEEDING}
"""How a run derives its draws from its seed (:data:`wirelessfl.results.io.SEEDING`), recorded in every checkpoint
and in the finished run's ``provenance.json``.

A run resumed under another scheme would continue its curves from draws the
scheme that started them never made, and mix two seedings in one trace; so
``--resume`` refuses a checkpoint written with another scheme, or before the
scheme was recorded (then each algorithm was seeded apart, ``derive_seed(seed,
algorithm)``).
"""


def network_rng(seed: int, profile: str, round: int) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, "network", profile, round))


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def unit_key(seed: int, curve: Curve, profile: SystemProfile | None) -> str:
    """The name of a unit's checkpoints: ``seed{seed}__{curve}`` (``__{profile}`` when trained per profile)."""
    suffix = f"__{profile.name}" if profile is not None else ""
    return f"seed{seed}__{_slug(curve.curve)}{suffix}"


def unit_fingerprint(scenario: Scenario, curve: Curve, seed: int) -> str:
    """SHA-256 of what one unit trains and times: the scenario's fingerprinted fields but its list of
    algorithms and seeds, plus this curve (algorithm, variant, label, parameters, training) and seed.

    Common random numbers make a unit's trace independent of the other curves and seeds, so a run whose
    scenario.yaml gains a curve or a seed resumes with every finished unit kept, and only an edit that
    changes a unit's own settings refuses its checkpoints."""
    content = {
        key: value
        for key, value in resolved(scenario).items()
        if key not in FINGERPRINT_IGNORES and key not in ("algorithms", "seeds")
    }
    content["unit"] = {
        "seed": seed, "algorithm": curve.algorithm, "variant": curve.variant, "curve": curve.curve,
        "params": curve.params, "training": curve.training,
    }  # fmt: skip
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def unit_keys(scenario: Scenario) -> list[list[tuple[int, str]]]:
    """Per curve of :func:`curves_of`, its units as ``(seed, unit key)``: one per seed, or one per seed and
    profile when the profiles can change what it trains."""
    profiles, budgets = scenario.profiles(), has_budgets(scenario)
    keys = []
    for curve in curves_of(scenario):
        each = profiles if profiles_can_change_training(profiles, curve, budgets) else [None]
        keys.append([(seed, unit_key(seed, curve, profile)) for seed in scenario.seeds for profile in each])
    return keys


def unit_stamps(scenario: Scenario) -> dict[str, tuple[str, ...]]:
    """``{unit key: the stamps its checkpoints may carry}``: the unit's fingerprint, and the whole
    scenario's (:func:`scenario_fingerprint`), which checkpoints written before units had their own carry
    (still valid while the scenario is unchanged)."""
    legacy = scenario_fingerprint(scenario)
    return {
        key: (unit_fingerprint(scenario, curve, seed), legacy)
        for curve, units in zip(curves_of(scenario), unit_keys(scenario))
        for seed, key in units
    }


def time_records(
    records: list[RoundRecord], network: NetworkModel, profile: SystemProfile, seed: int
) -> list[RoundTiming]:
    """Replay recorded plans through one profile (the train-once path)."""
    return [network.time_round(rec.plan, network_rng(seed, profile.name, rec.round)) for rec in records[1:]]


def delivery_rows(
    curve: Curve, seed: int, profile: SystemProfile, records: list[RoundRecord], timings: list[RoundTiming]
) -> list[dict[str, Any]]:
    """One row per downlink stream of every round in physical mode: its receivers, bits, seconds, the
    multicast's rate and the unicast repair traffic (``streams_link.csv``)."""
    rows = []
    for rec, timing in zip((r for r in records if r.round > 0), timings):
        for stream in timing.deliveries:
            rows.append({
                "curve": curve.curve, "profile": profile.name, "seed": seed, "round": rec.round,
                "stream": stream.label, "receivers": stream.receivers, "bits": stream.bits,
                "seconds": stream.seconds, "rate_bps": stream.rate_bps, "repair_bits": stream.repair_bits,
                "repaired": stream.repaired,
            })
    return rows


def rows_for(
    scenario: Scenario, curve: Curve, seed: int, profile: SystemProfile, records: list[RoundRecord],
    timings: list[RoundTiming], network: NetworkModel, groups: np.ndarray, train_sizes: np.ndarray | None = None,
    client_rounds: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], pd.DataFrame | None]:
    """Trace rows, per-client rows and (with ``client_rounds``) the per-client, per-round table of one
    unit under ``profile``; energy from ``train_sizes`` (the clients' training-set sizes)."""
    if train_sizes is None:
        train_sizes = np.zeros(network.num_clients)
    ledger = Ledger(scenario.energy_profiles()[profile.name], network.num_clients, train_sizes, scenario.training.local_epochs)
    energy = account(records, timings, ledger, network, per_client_rounds=client_rounds)
    rows = []
    time = cum_dl = cum_ul = 0.0
    unit = timings[0].time_unit if timings else ("s" if profile.physical is not None else "T_dl")
    for index, rec in enumerate(records):
        if rec.round == 0:
            round_time = dl = ul = 0.0
            dl_bits = ul_bits = 0.0
        else:
            timing = timings[index - 1]
            round_time = timing.t_end
            dl, ul = rec.plan.downlink_payload, rec.plan.uplink_payload
            dl_bits, ul_bits = network.bits(rec.plan)
        time += round_time
        cum_dl += dl
        cum_ul += ul
        rows.append(
            {
                "scenario": scenario.name,
                "algorithm": curve.algorithm,
                "variant": curve.variant,
                "curve": curve.curve,
                "profile": profile.name,
                "seed": seed,
                "round": rec.round,
                "time": time,
                "time_unit": unit,
                "round_time": round_time,
                **{k: rec.metrics.get(k, math.nan) for k in ("avg_acc", "worst_acc", "p10_acc", "avg_val_acc", "mean_loss", "unseen_acc")},
                "train_loss": rec.metrics.get("train_loss", math.nan),
                **({k: rec.metrics.get(k, math.nan) for k in FIT_COLUMNS} if scenario.eval_train else {}),
                "dl_payload": dl,
                "ul_payload": ul,
                "dl_bits": dl_bits,
                "ul_bits": ul_bits,
                "cum_dl_payload": cum_dl,
                "cum_ul_payload": cum_ul,
                "streams": rec.streams,
                "aggregated": rec.aggregated,
                "participants": rec.participants,
                **{name: values[index] for name, values in energy.trace.items()},
            }
        )
    last = records[-1]
    clients = [
        {
            "scenario": scenario.name,
            "algorithm": curve.algorithm,
            "variant": curve.variant,
            "curve": curve.curve,
            "profile": profile.name,
            "seed": seed,
            "client": i,
            "group": int(groups[i]),
            "accuracy": float(acc),
            **{name: energy.clients[name][i].item() for name in CLIENT_ENERGY_COLUMNS},
        }
        for i, acc in enumerate(last.client_acc)
    ]
    per_round = None
    if energy.client_rounds is not None:
        ids = {"scenario": scenario.name, "algorithm": curve.algorithm, "variant": curve.variant, "curve": curve.curve,
               "profile": profile.name, "seed": seed, "time_unit": unit}
        per_round = pd.DataFrame({**ids, **energy.client_rounds}) if len(energy.client_rounds["client"]) else None
        if per_round is not None:
            per_round.insert(per_round.columns.get_loc("client") + 1, "group", groups[per_round["client"].to_numpy()])
    return rows, clients, per_round


@dataclass
class SimulationResult:
    trace: pd.DataFrame
    clients: pd.DataFrame
    trained_units: int
    replayed: bool
    diagnostics: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    runtime: dict[str, dict[str, float]] = field(default_factory=dict)
    links: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: one row per participant x round x curve x profile x seed (None when not asked for)
    client_rounds: pd.DataFrame | None = None
    #: how the run drew its random numbers (``provenance.json``)
    provenance: dict[str, str] = field(default_factory=lambda: dict(PROVENANCE))


def simulate(
    scenario: Scenario,
    run_dir: Path | None = None,
    device: str | None = None,
    on_round: ProgressFn | None = None,
    force_per_profile: bool = False,
    stop_after_rounds: int | None = None,
    keep_models: bool = False,
    test_split: bool = True,
    client_rounds: bool = True,
    on_unit: Callable[[str, str], None] | None = None,
) -> SimulationResult:
    """Run every (seed, curve) of ``scenario``; resume from ``run_dir`` checkpoints.

    A finished unit's ``done`` checkpoint holds only what re-reporting needs
    (records, timings, clock, wall time) unless ``keep_models`` also keeps its
    algorithm state (models, optimizer state) for analysis scripts; ``partial``
    checkpoints always hold everything, to resume. The run directory remembers ``keep_models``
    (``checkpoints/KEEP_MODELS``), so that a resumed run keeps the models of the units it finishes too.

    ``stop_after_rounds`` interrupts the run after that many trained rounds in
    total (used to test resumption); it raises ``KeyboardInterrupt`` as a kill
    would. Without ``test_split`` no test split is ever evaluated (``wirelessfl tune``: only
    ``avg_val_acc`` is a number). ``client_rounds`` builds the per-client, per-round table (sweep units skip it, and so does a run
    that could have more than ``CLIENT_ROUNDS_LIMIT`` rows). ``on_unit`` is called with ``("start", key)`` and
    ``("done", key)`` around each unit's training (the progress lines of a run without a terminal).
    """
    client_rounds = client_rounds and client_round_rows(scenario) <= CLIENT_ROUNDS_LIMIT
    dev = resolve_device(device or scenario.device)
    profiles = scenario.profiles()
    per_profile = force_per_profile or profiles_can_change_training(profiles, budgets=has_budgets(scenario))
    ckpt_dir = checkpoint_dir(run_dir) if run_dir is not None else None
    if ckpt_dir is not None:
        keep_models = _remember_keep_models(ckpt_dir, keep_models)
    legacy = scenario_fingerprint(scenario)
    rows: list[dict[str, Any]] = []
    clients: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    per_round: list[pd.DataFrame] = []
    trained = 0
    diagnostics: dict[str, dict[int, dict[str, Any]]] = {}
    runtime: dict[str, dict[str, float]] = {}
    budget = [stop_after_rounds]

    def counting(progress: dict[str, Any]) -> None:
        if on_round is not None:
            on_round(progress)
        if budget[0] is not None:
            budget[0] -= 1
            if budget[0] <= 0:
                raise KeyboardInterrupt("stopped for a resumption test")

    save = (lambda u: _save(ckpt_dir, u.key, "partial", u.state(), u.fingerprint)) if ckpt_dir else None

    def load(unit: Unit, kind: str) -> dict[str, Any] | None:
        state = _load(ckpt_dir, unit.key, kind, (unit.fingerprint, legacy), scenario.rounds)
        path = _checkpoint_path(ckpt_dir, unit.key, kind) if ckpt_dir is not None else None
        if state is not None and path is not None and fingerprint_of(path) == legacy != unit.fingerprint:
            _save(ckpt_dir, unit.key, kind, state, unit.fingerprint)  # stamped for the whole scenario: now for its unit
        return state

    for seed in scenario.seeds:
        units = build_units(scenario, seed, dev, per_profile)
        trainer_of = followed_units(units)
        finished: set[str] = set()
        # trainers first, so that a follower is reached after the unit it may follow
        for unit in sorted(units, key=lambda u: u.key in trainer_of):
            if unit.key in finished:
                continue
            done = load(unit, "done")
            if done is not None:
                unit.restore(done)
                finished.add(unit.key)
                continue
            partial = load(unit, "partial")
            if partial is not None:
                unit.restore(partial)
            followers = []
            for follower in (f for f in units if trainer_of.get(f.key) is unit and f.key not in finished):
                state = load(follower, "done")
                if state is None:
                    state = load(follower, "partial")
                    if state is not None:
                        follower.restore(state)
                    if len(follower.records) == len(unit.records):  # at the same round (else it trains alone)
                        followers.append(follower)
            if on_unit is not None:
                on_unit("start", unit.key)
            unit.run(scenario.rounds, scenario.eval_every, counting, save, test_split, scenario.eval_last, followers)
            for ran in (unit, *followers):
                trained += 1
                finished.add(ran.key)
                if ckpt_dir is not None:
                    _save(ckpt_dir, ran.key, "done", ran.state(models=keep_models), ran.fingerprint)
                    _checkpoint_path(ckpt_dir, ran.key, "partial").unlink(missing_ok=True)
            if on_unit is not None:
                on_unit("done", unit.key)
        for unit in units:
            runtime[unit.key] = unit.runtime()
            extras = {rec.round: rec.diagnostics for rec in unit.records if rec.diagnostics}
            if extras:
                diagnostics[unit.key] = extras
            for prof in profiles if unit.profile is None else [unit.profile]:
                if unit.network is not None:
                    network, timings = unit.network, unit.timings
                elif prof.name == unit.clock_profile.name and len(unit.clock_timings) == len(unit.records) - 1:
                    # the rounds this run trained were already timed under this profile for the clock: reuse them
                    network, timings = unit.clock_network, unit.clock_timings
                else:
                    network = NetworkModel(prof, unit.data.num_clients, static_rng(seed, prof))
                    timings = time_records(unit.records, network, prof, seed)
                r, c, t = rows_for(
                    scenario, unit.curve, seed, prof, unit.records, timings, network, unit.data.groups,
                    unit.data.train_sizes, client_rounds,
                )
                rows.extend(r)
                clients.extend(c)
                if t is not None:
                    per_round.append(t)
                links.extend(delivery_rows(unit.curve, seed, prof, unit.records, timings))
    replayed = not per_profile and not any(profiles_can_change_training(profiles, c) for c in curves_of(scenario))
    table = pd.concat(per_round, ignore_index=True) if per_round else None
    return SimulationResult(
        pd.DataFrame(rows), pd.DataFrame(clients), trained, replayed, diagnostics, runtime, pd.DataFrame(links), table
    )


def followed_units(units: list[Unit]) -> dict[str, Unit]:
    """``{follower key: trainer unit}``: units of one seed and profile whose algorithm ``trains_as`` another's
    with the same parameters and training (:func:`shared_trainings`), which then train once; never with a
    battery budget (each unit's ledger decides who arrives)."""
    pairs: dict[str, Unit] = {}
    for profile in {u.profile.name if u.profile is not None else None for u in units}:
        group = [u for u in units if (u.profile.name if u.profile is not None else None) == profile and u.ledger is None]
        for follower, trainer in shared_trainings([(u.curve.algorithm, u.curve.params, u.curve.training) for u in group]).items():
            pairs[group[follower].key] = group[trainer]
    return pairs


def following_curves(scenario: Scenario) -> set[int]:
    """Indices in :func:`curves_of` order of the curves that follow another's training (:func:`followed_units`
    pairs their units), for what counts trainings ahead of a run: the cost preview and the progress bar."""
    if has_budgets(scenario):  # each unit's batteries decide who arrives: every curve trains its own
        return set()
    return set(shared_trainings([(c.algorithm, c.params, c.training) for c in curves_of(scenario)]))


def has_budgets(scenario: Scenario) -> bool:
    """True when some profile gives its devices a battery budget (which decides who takes part)."""
    return any(energy.has_budget for energy in scenario.energy_profiles().values())


def preflight(scenario: Scenario, source: str = "scenario") -> None:
    """Build the data, the model and every curve's algorithm once (first seed), as a run starts.

    Raises every configuration error the schema cannot see (a missing dataset,
    a parameter out of range for this data) as one ``ScenarioError`` line
    prefixed with ``source``; an algorithm's error also with the YAML path of
    the parameter it names (``config.algorithm_path``).
    """
    check_links(scenario, source)
    try:
        units = build_units(scenario, scenario.seeds[0])
        for unit in units:
            if not is_registered(type(unit.algorithm)):
                check_checkpointable(unit)
    except ValueError as err:
        message = first_line(str(err), type(err).__name__)
        where = algorithm_path(scenario, message)
        raise ScenarioError(f"{source}: {where + ': ' if where else ''}{message}") from None
    check_outage(scenario, units[0].algorithm.ctx.arch.param_count, source)


OUTAGE_REFUSED = 0.9
"""A profile whose link budget leaves at least this share of the clients in outage is refused: nearly nobody
could take part, and the rounds would last years."""


def check_outage(scenario: Scenario, model_params: int, source: str = "scenario") -> None:
    """Refuse, in one ``ScenarioError`` line, a physical profile whose link budget leaves (almost) every client
    in outage: one model (``model_params`` x its ``bits_per_parameter``) takes longer than
    ``physical.OUTAGE_S`` to receive or send at the client's mean rate over fading, for the first seed's drop
    (``physical.in_outage``). A run where fewer but most are says so when it ends (``results.links``)."""
    from wirelessfl.network.physical import OUTAGE_S, in_outage

    for profile in scenario.profiles():
        channel = profile.physical
        if channel is None:
            continue
        network = NetworkModel(profile, scenario.data.clients, static_rng(scenario.seeds[0], profile))
        bits = model_params * profile.bits_per_parameter
        out = int(in_outage(channel, network.path_loss_db, bits, network.uplink_loss_db, network.los).sum())
        if out >= OUTAGE_REFUSED * scenario.data.clients:
            raise ScenarioError(
                f"{source}: network {profile.name!r}: its link budget leaves {out} of {scenario.data.clients} clients in "
                f"outage (one model, {bits / 1e6:.3g} Mbit, takes over {OUTAGE_S:,.0f} s to receive or send at their mean "
                f"rate: bs_power_dbm {channel.bs_power_dbm:g}, ue_power_dbm {channel.ue_power_dbm:g}, cell_radius_m "
                f"{channel.cell_radius_m:g}); raise the powers or make the cell smaller"
            )


def check_links(scenario: Scenario, source: str = "scenario") -> None:
    """Every profile's links built (``prepare_links``), a failure as one ``ScenarioError`` line naming the profile."""
    for profile in scenario.profiles():
        try:
            prepare_links(profile)
        except ValueError as err:
            raise ScenarioError(f"{source}: network {profile.name!r}: {err}") from None


def prepare_links(profile: SystemProfile) -> None:
    """Build a profile's link abstractions now (``nr``: Sionna's tables, once, in a child process), so a
    missing Sionna is one line before anything is written rather than an error mid-run."""
    if profile.physical is not None:
        for direction in ("dl", "ul"):
            physical_link_model(profile.physical, direction)


def build_units(
    scenario: Scenario, seed: int, device: torch.device | None = None, per_profile: bool | None = None
) -> list[Unit]:
    """Data, model and one ``Unit`` per curve (x profile when training per profile) for ``seed``.

    Building is cheap next to training and raises every configuration error
    (missing dataset, bad hyper-parameter), so the CLI calls it before writing.
    """
    dev = device if device is not None else resolve_device(scenario.device)
    profiles = scenario.profiles()
    budgets = has_budgets(scenario)
    if per_profile is None:
        per_profile = profiles_can_change_training(profiles, budgets=budgets)
    data = build_federated_data(scenario.data_spec(), seed).to(dev)
    arch = get_architecture(scenario.model.name, data.input_shape, data.num_classes, scenario.model.head, **scenario.model.options)
    engine = LockstepEngine(arch, dev, accelerators=from_environment())
    return [
        Unit(scenario, curve, seed, data, engine, profile)
        for curve in curves_of(scenario)
        for profile in (profiles if per_profile or profiles_can_change_training(profiles, curve, budgets) else [None])
    ]


def static_rng(seed: int, profile: SystemProfile) -> np.random.Generator:
    """The draws a network makes once (user positions, LOS states, shadowing), per seed and profile; with
    ``physical.drop: common`` per seed only, so every such profile of a scenario places the same users
    (the same uniform draws, scaled to each cell) and a difference between profiles is their channels'."""
    common = profile.physical is not None and profile.physical.drop == "common"
    return np.random.default_rng(derive_seed(seed, "static", "common drop" if common else profile.name))


CHECKPOINT_TYPES = (*SEAM_TYPES, RoundRecord)
"""The dataclasses a checkpoint may rebuild (wirelessfl.checkpoint refuses every other object)."""


def _checkpoint_path(ckpt_dir: Path, key: str, kind: str) -> Path:
    return ckpt_dir / f"{key}.{kind}{SUFFIX}"


KEEP_MODELS_MARK = "KEEP_MODELS"


def _remember_keep_models(ckpt_dir: Path, keep_models: bool) -> bool:
    """True when this call or the one that started the run asked to keep models; marks the run for its resumes."""
    mark = ckpt_dir / KEEP_MODELS_MARK
    if keep_models and not mark.is_file():
        with resumable_writes(ckpt_dir.parent):
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(mark, "done checkpoints of this run keep their models (wirelessfl simulate --keep-models)\n")
    return keep_models or mark.is_file()


def checkpoint_dir(run_dir: Path) -> Path:
    """``run_dir/checkpoints``, refused in one line when something other than a folder (or nothing) is there."""
    path = Path(run_dir) / "checkpoints"
    if os.path.lexists(path) and (path.is_symlink() or not path.is_dir()):
        what = "a symbolic link" if path.is_symlink() else "a file"
        raise CheckpointError(
            f"{path}: {what}, not the run's checkpoint folder; move it away (the run then retrains from round 0)"
        )
    return path


def check_checkpoints(scenario: Scenario, run_dir: Path) -> dict[str, int]:
    """Read every checkpoint of ``run_dir`` once, before a resume prints or trains anything; returns the
    rounds each unit has done (``{unit key: round}``, units without a checkpoint left out), from which
    the cost preview and the progress bar count only what is left.

    Raises the first problem as one line: a damaged or foreign file, a symlink,
    or checkpoints written for other settings than ``scenario``.
    """
    stamps = unit_stamps(scenario)
    done: dict[str, int] = {}
    for path, key, kind in _unit_checkpoints(checkpoint_dir(run_dir), stamps):
        state = _read(path, stamps[key], kind, scenario.rounds)
        done[key] = max(done.get(key, 0), state["records"][-1].round)
    return done


def _unit_checkpoints(ckpt_dir: Path, stamps: dict[str, tuple[str, ...]]) -> list[tuple[Path, str, str]]:
    """``(path, unit key, kind)`` of every checkpoint in ``ckpt_dir`` of a unit in ``stamps``; a unit no longer in
    the scenario keeps its files, unread."""
    if not ckpt_dir.is_dir():
        return []
    found = []
    for path in sorted(ckpt_dir.iterdir()):
        for kind in ("done", "partial"):
            for suffix in (SUFFIX, ".pt"):
                key = path.name.removesuffix(f".{kind}{suffix}")
                if path.name.endswith(f".{kind}{suffix}") and key in stamps:
                    found.append((path, key, kind))
    return found


def check_run_scenario(scenario: Scenario, run_dir: Path) -> dict[str, int]:
    """What ``validate`` checks of a run folder's ``scenario.yaml`` before its model is imported: every checkpoint of
    a unit of ``scenario`` carries its stamp (the headers only: nothing is decoded, and a run under an older seeding
    still validates). Returns ``{unit key: 0}`` for the units found, the answer :func:`import_run_model` takes."""
    ckpt_dir = checkpoint_dir(run_dir)
    stamps = unit_stamps(scenario)
    found: dict[str, int] = {}
    for path, key, _ in _unit_checkpoints(ckpt_dir, stamps):
        if fingerprint_of(path) not in stamps[key]:
            raise _other_settings(path)
        found[key] = 0
    return found


def import_run_model(scenario: Scenario, run_dir: Path, checked: dict[str, int]) -> None:
    """Import the model module of a run folder's own ``scenario.yaml`` (read with ``import_models=False``) once its
    checkpoints have vouched for it; ``checked`` is :func:`check_checkpoints`' (or :func:`check_run_scenario`'s) answer.

    A scenario naming a ``package.module:factory`` beside checkpoints none of which belongs to one of its units
    (every curve renamed, say) is not the scenario the run was started with, and is refused before its module runs.
    The stamps are hashes of the scenario, not signatures: a run folder made to pass them still runs its scenario's
    module when resumed (docs/results.md, "What a run folder may contain")."""
    from wirelessfl.config import import_model, names_user_dataset, names_user_model

    source = Path(run_dir) / "scenario.yaml"
    ckpt_dir = checkpoint_dir(run_dir)
    if (names_user_model(scenario) or names_user_dataset(scenario)) and not checked and ckpt_dir.is_dir():
        what = f"model {scenario.model.name!r}" if names_user_model(scenario) else f"dataset loader {scenario.data.dataset!r}"
        if any(path.name.endswith((SUFFIX, ".pt")) for path in ckpt_dir.iterdir()):
            raise CheckpointError(
                f"{source}: none of the checkpoints in {ckpt_dir} was written for this scenario (was the file edited "
                f"after the run started?), so its {what} is not imported; put back the scenario "
                "the run started with, or run the edited file as a new run"
            )
    import_model(scenario, str(source))


def extend_run(run_dir: Path, rounds: int) -> Scenario:
    """Make a run directory (finished or interrupted) continue to ``rounds``; returns the longer scenario.

    Every unit continues from where it stopped, so the longer run's training equals a run started with
    ``rounds`` (randomness derives from seed, round and purpose; the evaluated rounds of the first run stay
    in its trace). A finished unit can only go on from its models, which its ``done`` checkpoint holds when
    the run was started with ``keep_models``; a unit without them is refused in one line before anything
    changes. Then each checkpoint becomes a ``partial`` one stamped for the longer scenario, and
    ``scenario.yaml`` is rewritten last. Checkpoints already stamped for it are accepted, so the same call
    completes an extension that was interrupted half-way.
    """
    from wirelessfl.config import dump_scenario, load_scenario
    from wirelessfl.results.io import atomic_write_text

    run_dir = Path(run_dir)
    source = run_dir / "scenario.yaml"
    started = load_scenario(source, import_models=False)  # its model is imported after the checkpoints vouch for it
    if rounds <= started.rounds:
        if rounds == started.rounds:
            return started
        raise ScenarioError(
            f"--rounds {rounds}: {run_dir} runs {started.rounds} rounds; a run can be extended, not shortened "
            f"(fewer rounds are a new run: `wirelessfl simulate {source} --rounds {rounds} --out NEW_DIR`)"
        )
    longer = load_scenario(source, {"rounds": rounds}, import_models=False)
    ckpt_dir = checkpoint_dir(run_dir)
    before, after = unit_stamps(started), unit_stamps(longer)
    states: dict[str, tuple[str, dict[str, Any]]] = {}
    lean = []
    for key in after:
        for kind in ("done", "partial"):
            path = _checkpoint_path(ckpt_dir, key, kind)
            if os.path.lexists(path):
                if fingerprint_of(path) in after[key]:
                    continue  # converted by an earlier, interrupted extension
                state = _read(path, before[key], kind, started.rounds)
                if "algorithm" not in state:
                    lean.append(key)
                states[key] = (kind, state)
    if lean:
        raise CheckpointError(
            f"--rounds {rounds}: {run_dir} cannot be extended: {len(lean)} finished units kept no models "
            f"({', '.join(lean[:3])}{', ...' if len(lean) > 3 else ''}); a run keeps them to be extended when "
            "started with --keep-models"
        )
    for key, (kind, state) in states.items():
        _save(ckpt_dir, key, "partial", state, after[key][0])
        if kind == "done":
            _checkpoint_path(ckpt_dir, key, "done").unlink()
    atomic_write_text(source, dump_scenario(longer))
    return longer


STATE_CONTENTS = (
    "tensors, NumPy arrays and scalars of numbers or booleans, None, bool, int, float, str, "
    "and lists, tuples, sets and dicts of these"
)
"""What an algorithm's ``state_dict()`` may hold: what a checkpoint stores without carrying code."""


def check_checkpointable(unit: Unit) -> None:
    """One line naming the algorithm when its state (:meth:`Unit.state`) holds something a checkpoint cannot
    store, before anything is written (asked of algorithms by import path; the registered ones are tested)."""
    try:
        dumps(unit.state(), CHECKPOINT_TYPES)
    except TypeError as err:
        raise CheckpointError(
            f"algorithm {display_name(type(unit.algorithm))!r}: {first_line(str(err))}; "
            f"an algorithm's state_dict() may hold {STATE_CONTENTS}"
        ) from None


def _save(ckpt_dir: Path, key: str, kind: str, state: dict[str, Any], stamp: str) -> None:
    """Atomically, with ``kind`` ("done" or "partial") inside the checksummed state, so that a file renamed to the
    other kind is caught on load (:func:`_check_state`); a full disk is one line saying to free space and resume
    (the last checkpoint is intact)."""
    with resumable_writes(ckpt_dir.parent):
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        state = {**state, "kind": kind}
        try:
            save_checkpoint(_checkpoint_path(ckpt_dir, key, kind), state, CHECKPOINT_TYPES, stamp, PROVENANCE)
        except TypeError as err:
            raise CheckpointError(
                f"{key}: {first_line(str(err))}; an algorithm's state_dict() may hold {STATE_CONTENTS}"
            ) from None


def _load(ckpt_dir: Path | None, key: str, kind: str, stamp: tuple[str, ...], rounds: int) -> dict[str, Any] | None:
    """The unit's checkpoint; a pickle ``.pt`` left by an older wirelessfl is refused, never unpickled."""
    if ckpt_dir is None:
        return None
    for path in (_checkpoint_path(ckpt_dir, key, kind), ckpt_dir / f"{key}.{kind}.pt"):
        if os.path.lexists(path):
            return _read(path, stamp, kind, rounds)
    return None


def _read(path: Path, stamp: tuple[str, ...], kind: str, rounds: int) -> dict[str, Any]:
    """The ``kind`` checkpoint at ``path`` of a unit of a ``rounds``-round scenario, whole and consistent."""
    try:
        return _check_state(path, load_checkpoint(path, CHECKPOINT_TYPES, stamp, PROVENANCE), kind, rounds)
    except ProvenanceMismatch as other:
        run = path.parent.parent
        made = (
            "before its seeding was recorded (each algorithm seeded apart)"
            if other.found is None
            else f"with the seeding {other.found!r}"
        )
        raise CheckpointError(
            f"{run}: refused to resume: {path.name} was written {made}, and this wirelessfl seeds with {SEEDING!r} "
            f"(one run would mix two seedings); start a new run: `wirelessfl simulate {run / 'scenario.yaml'} --out NEW_DIR`"
        ) from None
    except FingerprintMismatch:
        raise _other_settings(path) from None


def _check_state(path: Path, state: Any, kind: str, rounds: int) -> dict[str, Any]:
    """``state`` when it is what a ``kind`` checkpoint of a ``rounds``-round unit holds: records of rounds 0, 1, ...
    in order (a plan in every round but 0), a timing per round or none, the kind it was saved as (files written
    before the kind was recorded carry none) and, for ``done``, every round; for ``partial``, fewer and the models.

    A checksum proves the bytes are the ones written, not that they belong under this name: an older
    ``partial`` copied over a ``done`` file would otherwise finish the unit short of its rounds."""
    run = path.parent.parent
    retrain = f"delete it and run `wirelessfl simulate --resume {run}` to retrain that unit"
    problem = _state_problem(state, kind)
    if problem is not None:
        raise CheckpointError(f"{path}: damaged checkpoint ({problem}); {retrain}")
    last = state["records"][-1].round
    saved_as = state.get("kind", kind)
    if saved_as != kind:
        raise CheckpointError(
            f"{path}: holds a {saved_as} checkpoint (rounds 0 to {last} of {rounds}) under the name of a {kind} one; {retrain}"
        )
    if kind == "done" and last != rounds:
        raise CheckpointError(
            f"{path}: a finished unit's checkpoint must hold all {rounds} rounds, this one ends at round {last}; {retrain}"
        )
    if kind == "partial" and last >= rounds:
        raise CheckpointError(f"{path}: damaged checkpoint (a partial checkpoint at round {last} of {rounds}); {retrain}")
    return state


def _state_problem(state: Any, kind: str) -> str | None:
    """What makes ``state`` not a unit's checkpoint state (None when nothing does)."""
    if type(state) is not dict or type(state.get("records")) is not list or not state["records"]:
        return "no list of round records"
    records = state["records"]
    if not all(isinstance(rec, RoundRecord) and type(rec.round) is int and type(rec.metrics) is dict for rec in records):
        return "a round record of the wrong form"
    found = [rec.round for rec in records]
    if found != list(range(len(records))):
        shown = found if len(found) <= 8 else [*found[:4], "...", *found[-3:]]
        return f"its records hold rounds {shown}, not 0, 1, 2, ... in order"
    if records[0].plan is not None or not all(isinstance(rec.plan, CommPlan) for rec in records[1:]):
        return "a round without its plan"
    timings = state.get("timings")
    if type(timings) is not list:
        return "no list of round timings"
    if len(timings) not in (0, len(records) - 1):
        return f"timings for {len(timings)} rounds, records for {len(records) - 1}"
    if not all(isinstance(t, RoundTiming) for t in timings):
        return "a round timing of the wrong form"
    if not isinstance(state.get("clock"), float):
        return "no clock"
    if kind == "partial" and "algorithm" not in state:
        return "a partial checkpoint without the models to continue from"
    return None


def _other_settings(path: Path) -> CheckpointError:
    run = path.parent.parent
    return CheckpointError(
        f"{path}: written for other settings than {run / 'scenario.yaml'} (was that file edited after the run "
        "started?); put back the scenario the run started with, or run the edited file as a new run"
    )
