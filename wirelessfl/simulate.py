"""The co-simulation run: every (seed, curve) of a scenario trained, timed and tabulated; the one place that
orders what ``wirelessfl.run`` is made of.

When no profile can change who arrives (no deadline, full participation is not
required: sampled participants are drawn from the seed, not from the network),
training does not depend on the network, so each (algorithm variant, seed)
trains ONCE and its plans are replayed through every profile. Otherwise each
profile trains its own copy. Both paths give the same trace where both apply
(tested).

A *unit* (seed, curve, and profile when training per profile) is the grain of
resumption (``wirelessfl.run.unit``): it checkpoints its algorithm state and rows
every ``checkpoint_every`` rounds, atomically, and a finished unit writes its rows
once. All randomness derives from (seed, round, purpose), so a resumed unit
continues with exactly the draws an uninterrupted run would have made. Checks
before a run starts are ``wirelessfl.run.prepare``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from wirelessfl.accounting import CLIENT_ROUNDS_LIMIT, client_round_rows
from wirelessfl.checkpoint import fingerprint_of
from wirelessfl.config import Scenario, scenario_fingerprint
from wirelessfl.network import NetworkModel
from wirelessfl.run.build import build_units, resolve_device, store_root
from wirelessfl.run.checkpoints import PROVENANCE, checkpoint_dir, checkpoint_path, load_unit, save_unit
from wirelessfl.run.curves import curves_of, has_budgets, profiles_can_change_training
from wirelessfl.run.folder import remember_keep_models
from wirelessfl.run.followers import followed_units
from wirelessfl.run.rows import delivery_rows, rows_for, time_records
from wirelessfl.run.seeds import static_rng
from wirelessfl.run.unit import ProgressFn, Unit


@dataclass
class SimulationResult:
    """What a run returns: its tables (the trace, per-client, link and per-client-round rows), how many units
    trained, whether they were replayed through the profiles, and their diagnostics, runtime and provenance."""

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
    shards=None,
    client_store: str | None = None,
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
    ``("done", key)`` around each unit's training (the progress lines of a run without a terminal). ``shards``
    runs the local training's slot groups elsewhere (``learning.ray_shards.RayShards``: Ray actors), to the same trace.
    ``client_store`` (``memory`` or ``disk``; default: the scenario's, else memory) is where per-client state lives
    (``learning/client_store.py``; the cost check's ``RunCost.client_store`` when it chose); disk files go under
    ``run_dir/store`` (or ``client_store.path``), and a finished unit keeps only the snapshot its checkpoint refers to.
    """
    client_rounds = client_rounds and client_round_rows(scenario) <= CLIENT_ROUNDS_LIMIT
    dev = resolve_device(device or scenario.device)
    profiles = scenario.profiles()
    per_profile = force_per_profile or profiles_can_change_training(profiles, budgets=has_budgets(scenario))
    ckpt_dir = checkpoint_dir(run_dir) if run_dir is not None else None
    if ckpt_dir is not None:
        keep_models = remember_keep_models(ckpt_dir, keep_models)
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

    save = (lambda u: save_unit(ckpt_dir, u.key, "partial", u.state(), u.fingerprint)) if ckpt_dir else None

    def load(unit: Unit, kind: str) -> dict[str, Any] | None:
        state = load_unit(ckpt_dir, unit.key, kind, (unit.fingerprint, legacy), scenario.rounds)
        path = checkpoint_path(ckpt_dir, unit.key, kind) if ckpt_dir is not None else None
        if state is not None and path is not None and fingerprint_of(path) == legacy != unit.fingerprint:
            save_unit(ckpt_dir, unit.key, kind, state, unit.fingerprint)  # stamped for the whole scenario: now for its unit
        return state

    for seed in scenario.seeds:
        units = build_units(
            scenario, seed, dev, per_profile, shards, client_store=client_store, store_root=store_root(scenario, run_dir)
        )
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
                    save_unit(ckpt_dir, ran.key, "done", ran.state(models=keep_models), ran.fingerprint)
                    checkpoint_path(ckpt_dir, ran.key, "partial").unlink(missing_ok=True)
            if on_unit is not None:
                on_unit("done", unit.key)
        for unit in units:
            unit.stores.release(keep_latest=ckpt_dir is not None and keep_models)
            runtime[unit.key] = unit.runtime()
            extras = {rec.round: rec.diagnostics for rec in unit.records if rec.diagnostics}
            if extras:
                diagnostics[unit.key] = extras
            for prof in profiles if unit.profile is None else [unit.profile]:
                if unit.network is not None:
                    network, timings = unit.network, unit.timings
                elif unit.clock.timed_every_round(prof, len(unit.records) - 1):
                    # the rounds this run trained were already timed under this profile for the clock: reuse them
                    network, timings = unit.clock.network, unit.clock.timings
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
    root = store_root(scenario, run_dir)
    if root is not None and root.is_dir() and not any(root.iterdir()):
        root.rmdir()  # every unit's store files are gone
    replayed = not per_profile and not any(profiles_can_change_training(profiles, c) for c in curves_of(scenario))
    table = pd.concat(per_round, ignore_index=True) if per_round else None
    return SimulationResult(
        pd.DataFrame(rows), pd.DataFrame(clients), trained, replayed, diagnostics, runtime, pd.DataFrame(links), table
    )
