"""One unit of a run, one curve x seed (x profile when the network changes its training), and its round loop.

For each round::

    plan   = algorithm.plan(round)                 # CommPlan: who gets what
    timing = network.time_round(plan, rng)         # RoundTiming: when, who made it
    info   = algorithm.step(round, timing.arrived) # lockstep training + aggregation
    record metrics at the simulated time

A unit is the grain of resumption: ``state()`` is what its checkpoints hold,
``restore()`` continues from one, and all randomness derives from (seed, round,
purpose), so a resumed unit continues with exactly the draws an uninterrupted
run would have made.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.algorithms.base import draw_held_out, user_errors
from wirelessfl.config import Scenario
from wirelessfl.learning.client_store import ClientStores
from wirelessfl.learning.data.federated import FederatedData
from wirelessfl.learning.lockstep import LockstepEngine
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.network.buffered import buffered_timing
from wirelessfl.run.clock import Clock
from wirelessfl.run.curves import Curve
from wirelessfl.run.evaluation import RoundRecord, evaluate_for, evaluated
from wirelessfl.run.followers import follow
from wirelessfl.run.keys import unit_fingerprint, unit_key
from wirelessfl.run.ledger import budget_ledger, recharge
from wirelessfl.run.seeds import learning_seed, network_rng, static_rng
from wirelessfl.run.walltime import charge_phases, mark
from wirelessfl.seam import RoundTiming

ProgressFn = Callable[[dict[str, Any]], None]


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
        stores: ClientStores | None = None,
    ) -> None:
        self.scenario = scenario
        #: where the algorithm's per-client state lives (RAM unless given)
        self.stores = stores if stores is not None else ClientStores()
        self.curve = curve
        self.seed = seed
        self.profile = profile
        t = scenario.training_for(curve.training)
        self.network = NetworkModel(profile, data.num_clients, static_rng(seed, profile)) if profile is not None else None
        self.ledger = budget_ledger(scenario, profile, data.num_clients, data.train_sizes, t.local_epochs)
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
            asynchronous=t.aggregation.async_spec() if t.aggregation is not None else None,
            analog=self.round_analog if self.network is not None and curve.over_the_air else None,
            server_optimizer=t.server_optimizer.spec() if t.server_optimizer is not None else None,
            stores=self.stores,
        )
        kind = get_algorithm(curve.algorithm)
        with user_errors(kind, "__init__"):
            self.algorithm = kind(ctx, **curve.params)
        self.base_train, self.schedule = ctx.train, t.lr_schedule
        self.data = data
        self.records: list[RoundRecord] = []
        self.timings: list[RoundTiming] = []
        shown = profile or scenario.profiles()[0]
        self.clock = Clock(shown, self.network or NetworkModel(shown, data.num_clients, static_rng(seed, shown)))
        self.wall_s = 0.0
        self.phases: dict[str, float] = {}
        #: the key of the unit whose training this one followed (``Unit.run`` followers), else None
        self.follows: str | None = None
        #: asynchronous aggregation: the uploads still on their way, client -> landing time from the next round's start
        self.in_flight: dict[int, float] = {}

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
        since = mark(engine)
        theirs: dict[str, float] = {}
        try:
            if not self.records:
                with engine.phase("evaluation"), user_errors(type(self.algorithm), "evaluate (round 0)"):
                    metrics, acc = evaluate_for(self.scenario, self.algorithm, 0, test_split)
                self.records.append(RoundRecord(0, None, metrics, 0, 0, 0, acc))
                for follower in followers:
                    follow(follower, self, 0, True, test_split, theirs)
            start = self.records[-1].round + 1
            for r in range(start, rounds + 1):
                began = time.perf_counter()
                if self.ledger is not None:
                    self.algorithm.ctx.out_of_energy = self.ledger.battery.depleted
                self.at_round(r)
                with user_errors(type(self.algorithm), f"plan(round {r})"):
                    plan = self.algorithm.plan(r)
                with engine.phase("network"):
                    if self.algorithm.ctx.analog is not None:  # one analog upload (over the air); the clock's network is the unit's
                        timing = self.network.time_analog_round(
                            plan, network_rng(self.seed, self.clock.profile.name, r), self.round_analog(r, np.array(sorted(plan.participants), dtype=np.int64))
                        )
                    else:
                        timing = self.clock.network.time_round(plan, network_rng(self.seed, self.clock.profile.name, r))
                    if self.algorithm.ctx.asynchronous is not None:  # the round ends when the server's buffer fills
                        timing, self.in_flight = buffered_timing(timing, self.in_flight, self.algorithm.ctx.asynchronous.buffer)
                self.clock.tick(timing)
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
                        metrics, acc = evaluate_for(self.scenario, self.algorithm, r, test_split)
                else:
                    metrics, acc = {k: math.nan for k in self.records[-1].metrics}, self.records[-1].client_acc
                metrics["train_loss"] = info.train_loss
                streams = len(plan.streams)
                self.records.append(
                    RoundRecord(r, plan, metrics, streams, info.aggregated, len(plan.participants), acc, dict(info.extra))
                )
                self.wall_s += time.perf_counter() - began
                for follower in followers:
                    follow(follower, self, r, evaluated(r, rounds, eval_every, eval_last), test_split, theirs)
                if on_round is not None:
                    on_round(
                        {"unit": self.key, "round": r, "avg_acc": metrics["avg_acc"], "avg_val_acc": metrics["avg_val_acc"],
                         "seed": self.seed, "time": self.clock.now,
                         "time_unit": timing.time_unit, "profile": self.clock.profile.name}
                    )
                if checkpoint is not None and (r % self.scenario.checkpoint_every == 0) and r < rounds:
                    self.phases, since = charge_phases(self.phases, engine, since, theirs)  # a resumed unit keeps the time before its kill
                    with engine.phase("checkpointing"):
                        checkpoint(self)
                        for follower in followers:
                            checkpoint(follower)
        finally:
            self.phases, _ = charge_phases(self.phases, engine, since, theirs)

    def at_round(self, round: int) -> None:
        """Give the algorithm the client rate of ``round`` under ``training.lr_schedule`` (round 0: the base rate)."""
        if self.schedule is not None:
            self.algorithm.ctx.train = replace(self.base_train, lr=self.base_train.lr * self.schedule.factor(max(round, 1)))

    def state(self, models: bool = True) -> dict[str, Any]:
        """What a checkpoint holds; without ``models`` only what rows, diagnostics and runtime need."""
        state = {
            "records": self.records,
            "timings": self.timings,
            "clock": self.clock.now,
            "wall_s": self.wall_s,
            "phases": dict(self.phases),
            "follows": self.follows,
        }
        if self.in_flight:
            state["in_flight"] = {str(c): t for c, t in self.in_flight.items()}
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
            recharge(self.ledger, self.records, self.timings)
        self.clock.now = state["clock"]
        self.wall_s = state.get("wall_s", math.nan)
        self.phases = dict(state.get("phases", {}))
        self.follows = state.get("follows")
        self.in_flight = {int(c): float(t) for c, t in state.get("in_flight", {}).items()}

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
