"""Curves that train alike train once: a follower (``trains_as``) takes its trainer's state after each round.

FedAvg+ trains exactly as FedAvg and only evaluates differently; with common
random numbers the follower's trace equals the one it gives training alone
(``tests/test_shared_training.py``), at a fraction of the cost.
"""

from __future__ import annotations

import math
from dataclasses import replace

from wirelessfl.algorithms.base import shared_trainings
from wirelessfl.config import Scenario
from wirelessfl.learning.client_store import handover
from wirelessfl.run.curves import curves_of, has_budgets
from wirelessfl.run.evaluation import RoundRecord, evaluate_for
from wirelessfl.run.walltime import charge_follower, mark


def follow(unit, trainer, round: int, evaluate: bool, test_split: bool, theirs: dict[str, float]) -> None:
    """Record ``round`` of ``trainer`` as ``unit``'s own (see ``Unit.run``'s ``followers``); the wall and
    engine-phase time spent here are added to the unit's ``phases`` and to ``theirs`` (what the trainer must
    not count)."""
    engine = unit.algorithm.ctx.engine
    since = mark(engine)
    unit.follows = trainer.key
    unit.at_round(round)
    with handover():  # the trainer's client stores are copied as they are, not snapshotted to files
        unit.algorithm.follow(trainer.algorithm, round)
    if round == 0:
        with engine.phase("evaluation"):
            metrics, acc = evaluate_for(unit.scenario, unit.algorithm, 0, test_split)
        unit.records.append(RoundRecord(0, None, metrics, 0, 0, 0, acc))
    else:
        source = trainer.records[-1]
        if evaluate:
            with engine.phase("evaluation"):
                metrics, acc = evaluate_for(unit.scenario, unit.algorithm, round, test_split)
        else:
            metrics, acc = {k: math.nan for k in unit.records[-1].metrics}, unit.records[-1].client_acc
        metrics["train_loss"] = source.metrics["train_loss"]
        unit.records.append(replace(source, metrics=metrics, client_acc=acc, diagnostics=dict(source.diagnostics)))
        unit.clock.follow(trainer.clock)
        if unit.network is not None:
            unit.timings.append(trainer.timings[-1])
    spent = charge_follower(unit.phases, engine, since, theirs)
    if round > 0:  # as Unit.run: wall_s counts trained rounds, phases round 0's evaluation too
        unit.wall_s += spent


def followed_units(units: list) -> dict:
    """``{follower key: trainer unit}``: units of one seed and profile whose algorithm ``trains_as`` another's
    with the same parameters and training (:func:`shared_trainings`), which then train once; never with a
    battery budget (each unit's ledger decides who arrives)."""
    pairs = {}
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
