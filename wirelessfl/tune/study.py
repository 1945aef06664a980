"""``wirelessfl tune``: one Optuna study per curve, trials run by the sweep executors, scored on validation only.

A trial is an ordinary simulation of one curve (the scenario's first network
profile, ``tune.seeds``, ``tune.rounds``) with sampled values, run with
``test_split=False``: the test split is never evaluated, so nothing a trial
returns can leak it. The objective is the mean validation accuracy
(``avg_val_acc``, the training clients' own models on their own validation
splits) over the last ``tune.last_rounds`` evaluated rounds, averaged over
the seeds. Each evaluated round is reported to the study, so the median
pruner can stop a trial whose curve trails the finished ones.

The studies live in ``study.db`` (SQLite) in the tuning folder. Trials are
asked in batches of ``tune.batch`` per curve, all run, then all told; the TPE
sampler of each ask is seeded from ``(sampler_seed, curve, trials finished)``.
So what a study samples depends only on the finished trials, not on the
number of workers or on the order they finish in, and a killed search resumes
(``--resume``) to the trials an uninterrupted one makes: the trials it left
running are marked failed (``interrupted``) and asked again with their values.
A resumed trial starts from round 0 (trials are short; its reports are then
the same as an uninterrupted trial's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from wirelessfl.algorithms import get_algorithm
from wirelessfl.algorithms.base import derive_seed
from wirelessfl.config import AlgorithmConfig, Scenario, ScenarioError, TuneConfig, parse_scenario
from wirelessfl.tune.outputs import TuneResult, write_outputs
from wirelessfl.tune.space import Param, lever_of, merge_training, resolve_space, split_trial

STUDY_FILE = "study.db"
INTERRUPTED = "interrupted"
EventFn = Callable[[str, Any, Any], None]


def tune_config(scenario: Scenario) -> TuneConfig:
    return scenario.tune if scenario.tune is not None else TuneConfig()


@dataclass(frozen=True)
class Target:
    """One curve to tune: its algorithm entry, the values the scenario fixes, and its search space."""

    curve: str
    algorithm: str
    fixed: dict[str, Any]
    training: dict[str, Any]
    space: dict[str, Param]


def targets(scenario: Scenario) -> list[Target]:
    """Every curve of the scenario with its resolved space (see :func:`wirelessfl.tune.space.resolve_space`)."""
    cfg = tune_config(scenario)
    out = []
    for algo in scenario.algorithms:
        fixed_keys = {*algo.params, *algo.variants}
        space_fixed = {key: None for key in fixed_keys}
        for _, curve, params in algo.expand():
            space = resolve_space(get_algorithm(algo.name), space_fixed, cfg.overrides(algo.name))
            out.append(Target(curve, algo.name, dict(params), lever_blocks(scenario, algo.training, space), space))
    return out


def lever_blocks(scenario: Scenario, training: dict[str, Any] | None, space: dict[str, Param]) -> dict[str, Any]:
    """A curve's ``training`` overrides, with the scenario's block of each lever its space searches copied in
    where the curve has none of its own (a trial varies a field of the block the curve runs with)."""
    out = dict(training or {})
    for lever in {lever_of(key) for key in space} - {None}:
        block = getattr(scenario.training, lever)
        if out.get(lever) is None and block is not None:
            out[lever] = block.model_dump(exclude_none=True)
    return out


def trial_scenario(scenario: Scenario, target: Target, values: dict[str, Any], label: str | None = None) -> Scenario:
    """The scenario one trial runs: ``target``'s curve alone with ``values``, on the tuning budget."""
    cfg = tune_config(scenario)
    params, training = split_trial(values)
    algo = AlgorithmConfig(
        name=target.algorithm,
        label=label or target.curve,
        params={**target.fixed, **params},
        training=merge_training(target.training, training) or None,
    )
    raw = scenario.model_dump()
    raw.update(
        algorithms=[algo.model_dump()],
        rounds=cfg.rounds or scenario.rounds,
        seeds=list(cfg.seeds or scenario.seeds[:1]),
        networks=scenario.networks[:1],
        sweep={},
        tune=None,
    )
    return parse_scenario(raw, source="tune")


def check_tunable(scenario: Scenario) -> None:
    """One line if the scenario cannot be tuned: no validation split, an objective over more rounds than a
    trial evaluates (but the default ``last_rounds``, which a short test trial meets), a curve with nothing
    to search."""
    if scenario.data.split[1] <= 0:
        raise ScenarioError(
            f"data.split: tuning scores trials on the validation split, which is empty here ({scenario.data.split}); "
            "give it a fraction, e.g. [0.6, 0.2, 0.2]"
        )
    from wirelessfl.run.evaluation import evaluated

    cfg = tune_config(scenario)
    rounds = cfg.rounds or scenario.rounds
    scored = sum(evaluated(r, rounds, scenario.eval_every, scenario.eval_last) for r in range(1, rounds + 1))
    default = TuneConfig.model_fields["last_rounds"].default  # which covers every evaluated round of a shorter trial
    if cfg.last_rounds > scored and cfg.last_rounds != default:
        raise ScenarioError(
            f"tune.last_rounds: {cfg.last_rounds} evaluated rounds for the objective, but a trial of {rounds} rounds "
            f"(eval_every {scenario.eval_every}) evaluates {scored}; at most {scored}, or more rounds (tune.rounds)"
        )
    for target in targets(scenario):
        for key in target.space:
            lever = lever_of(key)
            if lever is not None and target.training.get(lever) is None:
                raise ScenarioError(
                    f"tune.algorithms.{target.algorithm}: {key} searches the {lever} block of {target.curve!r}, which has none; "
                    f"set training.{lever} (or the curve's own) in the scenario (docs/levers.md)"
                )
        if not target.space:
            raise ScenarioError(
                f"tune.algorithms.{target.algorithm}: nothing to search for {target.curve!r} (the scenario fixes every "
                "tunable of its space); name a tunable with a range"
            )


def endpoint_scenario(scenario: Scenario) -> Scenario:
    """Every curve at every end of its space (low ends, high ends, each choice) in one scenario, so that one
    build of the data and the algorithms checks that the whole space is valid for this scenario.

    A value the schema refuses is one ``ScenarioError`` line naming the ``tune.algorithms`` entry."""
    algorithms = []
    for target in targets(scenario):
        ends = {key: param.endpoints() for key, param in target.space.items()}
        width = max(len(values) for values in ends.values())
        for i in range(width):
            values = {key: options[min(i, len(options) - 1)] for key, options in ends.items()}
            try:
                trial = trial_scenario(scenario, target, values, label=f"{target.curve} end {i}")
            except ScenarioError as err:
                reason = str(err).removeprefix("tune: ")
                raise ScenarioError(f"tune.algorithms.{target.algorithm}: an end of the search space of {target.curve!r} is refused: {reason}") from None
            algorithms.append(trial.algorithms[0])
    raw = trial_scenario(scenario, targets(scenario)[0], {}).model_dump()
    raw["algorithms"] = [a.model_dump() for a in algorithms]
    raw["seeds"] = raw["seeds"][:1]
    return parse_scenario(raw, source="tune")


# -- the trial, in a worker ----------------------------------------------------------------------


@dataclass(frozen=True)
class TrialTask:
    """What a worker needs to run and report one trial: picklable, no torch or optuna objects."""

    key: str
    label: str
    curve: str
    number: int
    trial_id: int
    storage: str
    scenario: Scenario
    last_rounds: int
    pruner: str
    startup_trials: int
    warmup_rounds: int


def storage_url(out_dir: Path) -> str:
    return f"sqlite:///{Path(out_dir).resolve() / STUDY_FILE}"


def open_storage(url: str):
    import optuna

    # several processes write one SQLite file (workers report, the parent tells): wait for the lock
    return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 120}})


def make_pruner(kind: str, startup_trials: int, warmup_rounds: int):
    import optuna

    if kind == "none":
        return optuna.pruners.NopPruner()
    return optuna.pruners.MedianPruner(n_startup_trials=max(1, startup_trials), n_warmup_steps=warmup_rounds)


def objective(trace: pd.DataFrame, last_rounds: int) -> float:
    """Mean ``avg_val_acc`` over the last ``last_rounds`` evaluated rounds of each seed, averaged over seeds."""
    evaluated = trace[trace["round"] > 0].dropna(subset=["avg_val_acc"]).sort_values("round")
    per_seed = evaluated.groupby("seed")["avg_val_acc"].apply(lambda s: s.tail(last_rounds).mean())
    return float(per_seed.mean()) if len(per_seed) else math.nan


def run_trial(task: TrialTask, threads: int | None = None, on_round: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Run one trial (test split never evaluated), report each evaluated round to the study, stop when pruned."""
    import optuna

    from wirelessfl.simulate import simulate

    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(
        study_name=task.curve, storage=open_storage(task.storage),
        pruner=make_pruner(task.pruner, task.startup_trials, task.warmup_rounds),
    )
    trial = optuna.trial.Trial(study, task.trial_id)
    rounds, seeds = task.scenario.rounds, list(task.scenario.seeds)
    last = [math.nan]

    def report(progress: dict[str, Any]) -> None:
        value = progress.get("avg_val_acc", math.nan)
        if on_round is not None:
            on_round(progress)
        if value != value:
            return
        last[0] = value
        trial.report(value, seeds.index(progress["seed"]) * rounds + progress["round"])
        if trial.should_prune():
            raise optuna.TrialPruned()

    try:
        result = simulate(task.scenario, on_round=report, test_split=False)
    except optuna.TrialPruned:
        return {"state": "pruned", "value": last[0]}
    return {"state": "complete", "value": objective(result.trace, task.last_rounds)}


# -- the search, in the parent -------------------------------------------------------------------


def distributions(space: dict[str, Param]) -> dict[str, Any]:
    import optuna

    out = {}
    for key, param in space.items():
        if param.choices is not None:
            out[key] = optuna.distributions.CategoricalDistribution(list(param.choices))
        elif param.integer:
            out[key] = optuna.distributions.IntDistribution(int(param.low), int(param.high), log=param.log)
        else:
            out[key] = optuna.distributions.FloatDistribution(float(param.low), float(param.high), log=param.log)
    return out


def _finished(study) -> int:
    """Trials that count against the budget: complete, pruned, and failed ones other than those a kill left."""
    from optuna.trial import TrialState

    count = 0
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            count += 1
        elif t.state == TrialState.FAIL and not t.user_attrs.get(INTERRUPTED):
            count += 1
    return count


def requeue_interrupted(study) -> int:
    """Trials a killed search left running: marked failed (``interrupted``) and asked again with their values."""
    from optuna.trial import TrialState

    stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for t in stale:
        study._storage.set_trial_user_attr(t._trial_id, INTERRUPTED, True)
        study.tell(t.number, state=TrialState.FAIL)
        study.enqueue_trial(dict(t.params))
    return len(stale)


def run_tune(
    scenario: Scenario,
    out_dir: Path,
    executor,
    on_event: EventFn | None = None,
    stop_after_trials: int | None = None,
) -> TuneResult:
    """Run every curve's study to ``tune.trials`` finished trials; resume whatever ``out_dir/study.db`` holds.

    ``stop_after_trials`` interrupts after that many trials were told in this call (to test resumption):
    it raises ``KeyboardInterrupt`` with the next batch's trials asked and left running, as a kill would.
    """
    import optuna
    from optuna.trial import TrialState


    optuna.logging.set_verbosity(optuna.logging.WARNING)
    emit = on_event or (lambda kind, task, payload: None)
    cfg = tune_config(scenario)
    url = storage_url(out_dir)
    storage = open_storage(url)
    todo = targets(scenario)
    studies = {
        t.curve: optuna.create_study(study_name=t.curve, storage=storage, direction="maximize", load_if_exists=True)
        for t in todo
    }
    requeued = sum(requeue_interrupted(study) for study in studies.values())
    notes = [f"{requeued} trial(s) interrupted by the earlier stop were run again from round 0"] if requeued else []
    told = 0
    with executor:
        while True:
            tasks, asked = [], {}
            for target in todo:
                study = studies[target.curve]
                done = _finished(study)
                count = min(cfg.batch - done % cfg.batch, cfg.trials - done)
                dists = distributions(target.space)
                for j in range(max(0, count)):
                    study.sampler = optuna.samplers.TPESampler(
                        seed=derive_seed(cfg.sampler_seed, "tune", target.curve, done + j) % 2**32,
                        n_startup_trials=cfg.startup_trials,
                    )
                    trial = study.ask(dists)
                    task = TrialTask(
                        key=f"{target.curve}#{trial.number}", label=f"{target.curve} trial {trial.number}",
                        curve=target.curve, number=trial.number, trial_id=trial._trial_id, storage=url,
                        scenario=trial_scenario(scenario, target, dict(trial.params)), last_rounds=cfg.last_rounds,
                        pruner=cfg.pruner, startup_trials=cfg.startup_trials, warmup_rounds=cfg.warmup_rounds,
                    )
                    tasks.append(task)
                    asked[task.key] = study
            if not tasks:
                break
            if stop_after_trials is not None and told >= stop_after_trials:
                raise KeyboardInterrupt("stopped for a resumption test")
            # told only once the whole batch has run: a trial still running must not see (and be pruned
            # against) a trial of its own batch that finished first, or results would follow timing
            finished = list(executor.run(tasks, emit, work=run_trial))
            for task, info, error in sorted(finished, key=lambda item: (item[0].curve, item[0].number)):
                study = asked[task.key]
                if error:
                    study._storage.set_trial_user_attr(task.trial_id, "error", error)
                    study.tell(task.number, state=TrialState.FAIL)
                    emit("failed", task, error)
                elif info["state"] == "pruned":
                    study.tell(task.number, state=TrialState.PRUNED)
                    emit("done", task, info)
                else:
                    study.tell(task.number, info["value"] if info["value"] == info["value"] else None,
                               state=TrialState.COMPLETE if info["value"] == info["value"] else TrialState.FAIL)
                    emit("done", task, info)
                told += 1
    return write_outputs(scenario, out_dir, todo, studies, notes)


def all_curves_scenario(scenario: Scenario) -> Scenario:
    """One trial of every curve at the scenario's values, as one run (what the cost preview times)."""
    raw = trial_scenario(scenario, targets(scenario)[0], {}).model_dump()
    raw["algorithms"] = [a.model_dump() for a in scenario.algorithms]
    return parse_scenario(raw, source="tune")


@dataclass(frozen=True)
class TuneCost:
    """The cost preview: one trial of every curve, and the whole budget, on this machine."""

    curves: int
    trials: int
    rounds: int
    seeds: int
    profile: str
    memory_line: str
    one_trial_s: float
    finished: int = 0
    """Trials a resumed tuning's studies already hold (all curves together): the preview times the rest."""

    def line(self) -> str:
        from wirelessfl.cost import format_duration

        budget = self.curves * self.trials
        left = max(0, budget - self.finished)
        total = self.one_trial_s * self.trials * left / budget
        what = "the whole budget" if self.finished == 0 else f"the {left} of {budget} trials left"
        return (
            f"tuning {self.curves} curve(s) x {self.trials} trials, each {self.rounds} rounds x {self.seeds} seed(s) on "
            f"profile {self.profile}: one trial of every curve {format_duration(self.one_trial_s)}, {what} "
            f"{format_duration(total)} on this machine in one process (timed rounds of each curve; pruned trials stop "
            f"early, trials drawing more local epochs cost more, parallel workers divide it); {self.memory_line}"
        )


def trials_finished(scenario: Scenario, out_dir: Path) -> int:
    """Trials that count against the budget in ``out_dir``'s studies, over every curve (0 without a study file)."""
    import optuna

    if not (Path(out_dir) / STUDY_FILE).is_file():
        return 0
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(storage_url(out_dir))
    names = {summary.study_name for summary in optuna.get_all_study_summaries(storage)}
    budget = tune_config(scenario).trials
    return sum(
        min(_finished(optuna.load_study(study_name=t.curve, storage=storage)), budget)
        for t in targets(scenario) if t.curve in names
    )


def probe_seconds(scenario: Scenario) -> float:
    """Seconds of one trial of every curve: each curve's rounds timed as a trial runs them (``run.probe``)
    (training, validation, network), times the trial's rounds and seeds, plus one data and model build per trial."""
    import time

    from wirelessfl.run.build import build_units
    from wirelessfl.run.probe import round_seconds

    run = all_curves_scenario(scenario)
    began = time.perf_counter()
    units = build_units(run, run.seeds[0])
    build_s = (time.perf_counter() - began) / max(1, len(units))
    total = 0.0
    for unit in units:
        total += round_seconds(unit) * run.rounds * len(run.seeds) + build_s
    return total


def tune_cost(scenario: Scenario) -> TuneCost:
    """Memory (``wirelessfl.cost.check_run`` of one trial of every curve, which raises its one-line
    ``ValueError`` when a trial would not fit) and time (:func:`probe_seconds`) of the tuning."""
    from wirelessfl.cost import check_run

    cfg = tune_config(scenario)
    run = all_curves_scenario(scenario)
    memory = check_run(run).line().split(";")[0]
    return TuneCost(
        curves=len(targets(scenario)), trials=cfg.trials, rounds=run.rounds, seeds=len(run.seeds),
        profile=run.profiles()[0].name, memory_line=memory, one_trial_s=probe_seconds(scenario),
    )
